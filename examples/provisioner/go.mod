module github.com/groundworkhq/groundwork/examples/provisioner

go 1.26

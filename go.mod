module github.com/groundworkhq/groundwork

go 1.26.8

// A small static program with one module dependency, so the image tests have a binary with
// build info and a module list without the minute-long build of groundwork itself.
package main

import (
	"fmt"

	"github.com/oklog/ulid/v2"
)

func main() { fmt.Println(ulid.Make()) }

// Command use is apisize's -uses test input: it uses 6 names of the api package.
package main

import (
	"fmt"

	"github.com/rmqguard/rmqguard/tools/apisize/testdata/api"
)

func main() {
	c := api.New("x")                         // api.New
	c.WithLimit(api.Alpha)                    // api.Config.WithLimit, api.Alpha
	d := api.Config{Name: "y"}                // api.Config, api.Config.Name
	fmt.Println(c.Valid(), d.Valid(), c.Name) // api.Config.Valid; c.Name again
}

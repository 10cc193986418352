// CNCF Distribution's registry for the local cluster, with only the
// filesystem storage driver: images live in a folder of the cache, served on
// loopback over plain HTTP, and nothing is ever proxied from elsewhere.
package main

import (
	"os"

	"github.com/distribution/distribution/v3/registry"
	_ "github.com/distribution/distribution/v3/registry/storage/driver/filesystem"
)

func main() {
	if err := registry.RootCmd.Execute(); err != nil {
		os.Exit(1)
	}
}

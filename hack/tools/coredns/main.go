// CoreDNS for the local cluster's real node, with only the plugins its
// Corefile uses: the stock build links every plugin (cloud DNS providers
// among them), which costs minutes of compile time and serves nothing here.
package main

import (
	"log"

	"github.com/coredns/coredns/core/dnsserver"
	"github.com/coredns/coredns/coremain"

	_ "github.com/coredns/coredns/plugin/bind"
	_ "github.com/coredns/coredns/plugin/cache"
	_ "github.com/coredns/coredns/plugin/errors"
	_ "github.com/coredns/coredns/plugin/health"
	_ "github.com/coredns/coredns/plugin/kubernetes"
	_ "github.com/coredns/coredns/plugin/log"
	_ "github.com/coredns/coredns/plugin/ready"
)

// The order in which the plugins handle a query, as in CoreDNS's plugin.cfg.
var directives = []string{"bind", "health", "ready", "errors", "log", "cache", "kubernetes"}

func main() {
	if err := dnsserver.SetDirectives(directives); err != nil {
		log.Fatal(err)
	}
	coremain.Run()
}

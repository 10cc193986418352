// Command pause is the sandbox ("pause") container of the local real node:
// containerd starts one per pod to hold the pod's namespaces open. It only
// waits for SIGTERM or SIGINT and then exits 0. hack/images.sh builds it with
// the machine's own Go into a scratch image, so containerd never needs to
// pull registry.k8s.io/pause.
package main

import (
	"os"
	"os/signal"
	"syscall"
)

func main() {
	// As PID 1 the process gets no default action for these signals: without
	// a handler it would ignore them and be killed only after the grace period.
	stop := make(chan os.Signal, 1)
	signal.Notify(stop, syscall.SIGTERM, syscall.SIGINT)
	<-stop
}

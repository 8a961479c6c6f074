//go:build unix

package main

import (
	"os"
	"os/signal"
	"syscall"

	"github.com/nvdp-project/nvdp/serve"
)

// adminSignals gives the signals an operator sends a running server to
// serve.Server.HandleSignals until the returned stop is called: SIGUSR1
// writes a backup of a file ledger, SIGHUP reads the keys file at keysPath
// again (without one, SIGHUP is logged and ignored: it would otherwise end
// the process).
func adminSignals(srv *serve.Server, keysPath string) (stop func()) {
	sig := make(chan os.Signal, 1)
	signal.Notify(sig, syscall.SIGUSR1, syscall.SIGHUP)
	done := make(chan struct{})
	go func() {
		srv.HandleSignals(sig, syscall.SIGUSR1, syscall.SIGHUP, keysPath)
		close(done)
	}()
	return func() {
		signal.Stop(sig) // no signal is sent on sig after it returns
		close(sig)
		<-done
	}
}

//go:build unix

package main

import (
	"os"
	"os/signal"
	"syscall"

	"github.com/nvdp-project/nvdp/serve"
)

// backupOnSignal makes SIGUSR1 write a backup of srv's ledger
// (serve.Server.Backup logs it) until the returned stop is called.
func backupOnSignal(srv *serve.Server) (stop func()) {
	sig := make(chan os.Signal, 1)
	signal.Notify(sig, syscall.SIGUSR1)
	done := make(chan struct{})
	go func() {
		for {
			select {
			case <-sig:
				srv.Backup() // logged, counted in the metrics
			case <-done:
				return
			}
		}
	}()
	return func() {
		signal.Stop(sig)
		close(done)
	}
}

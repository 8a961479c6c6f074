//go:build unix

package main

import (
	"log/slog"
	"os"
	"os/signal"
	"syscall"

	"github.com/nvdp-project/nvdp/serve"
)

// adminSignals handles the signals an operator sends a running server,
// until the returned stop is called: SIGUSR1 writes a backup of a file
// ledger (serve.Server.Backup logs it); SIGHUP reads the keys file again
// and gives it to the server (serve.Server.ReloadKeys; a file that does not
// read or check is logged and the keys in use stay). Without a keys file
// SIGHUP is logged and ignored (it would otherwise end the process).
func adminSignals(srv *serve.Server, keysPath string) (stop func()) {
	sig := make(chan os.Signal, 1)
	signal.Notify(sig, syscall.SIGUSR1, syscall.SIGHUP)
	done := make(chan struct{})
	go func() {
		for {
			select {
			case s := <-sig:
				if s == syscall.SIGUSR1 {
					srv.Backup() // logged, counted in the metrics
					continue
				}
				if keysPath == "" {
					slog.Warn("SIGHUP: no keys file to read again")
					continue
				}
				k, err := serve.ReadKeys(keysPath)
				if err == nil {
					err = srv.ReloadKeys(k)
				}
				if err != nil {
					slog.Error("SIGHUP: keys not reloaded; the keys in use stay", "keys", keysPath, "error", err)
				}
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

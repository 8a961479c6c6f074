//go:build !unix

package main

import (
	"log/slog"

	"github.com/nvdp-project/nvdp/serve"
)

// adminSignals: this system has no SIGUSR1 or SIGHUP; backups run every
// --backup-every only, and the keys file is read at start only.
func adminSignals(*serve.Server, string) (stop func()) {
	slog.Info("no SIGUSR1 or SIGHUP on this system: ledger backups only every --backup-every, keys read at start only")
	return func() {}
}

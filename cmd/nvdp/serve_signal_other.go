//go:build !unix

package main

import (
	"log/slog"

	"github.com/nvdp-project/nvdp/serve"
)

// backupOnSignal: this system has no SIGUSR1; backups run every
// --backup-every only.
func backupOnSignal(*serve.Server) (stop func()) {
	slog.Info("no SIGUSR1 on this system: ledger backups only every --backup-every")
	return func() {}
}

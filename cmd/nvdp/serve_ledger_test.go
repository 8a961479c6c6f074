package main

import (
	"crypto/sha256"
	"encoding/json"
	"fmt"
	nvledger "github.com/nvdp-project/nvdp/ledger"
	"math/rand/v2"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"

	"github.com/nvdp-project/nvdp/option"
	"github.com/nvdp-project/nvdp/serve"
	"github.com/nvdp-project/nvdp/serve/servetest"
)

// embedOne sends one text to the server as key and returns the status and
// the error code ("" on 200).
func (p *serveProcess) embedOne(t *testing.T, key string) (int, string) {
	t.Helper()
	code, body := servetest.Do(t, http.MethodPost, p.url+"/v1/embed", key, "application/json", `{"texts": ["a gripping, funny film"]}`)
	e, _ := body["error"].(map[string]any)
	if e == nil {
		return code, ""
	}
	return code, e["code"].(string)
}

// TestServeLedgerDeletedAndRestored is the case, against real
// files and processes: `nvdp serve` refuses to start on a missing ledger
// and says how to create one; once started on a ledger made by `nvdp serve
// ledger init`, deleting the ledger stops the releases (503, an error log
// line); SIGUSR1 then writes a backup of the charges from the open file;
// restarting on the missing ledger fails again; `nvdp serve ledger restore`
// refuses without --accept-rollback and restores with it, and the restarted
// server holds every release it made.
func TestServeLedgerDeletedAndRestored(t *testing.T) {
	dir := t.TempDir()
	ledger, keys, backups := filepath.Join(dir, "ledger.db"), filepath.Join(dir, "keys.txt"), filepath.Join(dir, "backups")
	os.Mkdir(backups, 0o700)
	key, err := serve.GenerateKey()
	if err != nil {
		t.Fatal(err)
	}
	if err := serve.AppendKey(keys, "alice", key, option.Auto()); err != nil {
		t.Fatal(err)
	}
	serveArgs := []string{"serve", "--model", "fake", "--addr", "127.0.0.1:0", "--ledger", ledger, "--keys", keys, "--budget-epsilon", "1e6"}

	_, stderr, code := runHelper(t, serveArgs...)
	if code != 1 || !strings.Contains(stderr, "--ledger: ledger "+ledger+" does not exist") ||
		!strings.Contains(stderr, "nvdp serve ledger init --ledger "+ledger) {
		t.Fatalf("serve on a missing ledger: exit %d\n%s", code, stderr)
	}
	if _, err := os.Stat(ledger); err == nil {
		t.Fatal("serve created the ledger")
	}
	out, stderr, code := runHelper(t, "serve", "ledger", "init", "--ledger", ledger)
	var info nvledger.Info
	if code != 0 || json.Unmarshal([]byte(out), &info) != nil || len(info.LedgerID) != 32 {
		t.Fatalf("ledger init: exit %d %s\n%s", code, out, stderr)
	}
	if _, stderr, code := runHelper(t, "serve", "ledger", "init", "--ledger", ledger); code != 1 || !strings.Contains(stderr, "exists") {
		t.Fatalf("second init: exit %d\n%s", code, stderr)
	}

	p := startServe(t, ledger, keys, 0, "--backup-dir", backups)
	for i := range 3 {
		if code, ec := p.embedOne(t, key); code != 200 {
			t.Fatalf("release %d: %d %s", i, code, ec)
		}
	}
	if err := os.Remove(ledger); err != nil {
		t.Fatal(err)
	}
	if code, ec := p.embedOne(t, key); code != http.StatusServiceUnavailable || ec != "ledger_unavailable" {
		t.Fatalf("release after deleting the ledger: %d %s", code, ec)
	}
	if code, _ := p.get(t, "/readyz", ""); code != http.StatusServiceUnavailable {
		t.Errorf("readyz: %d", code)
	}
	if err := p.cmd.Process.Signal(syscall.SIGUSR1); err != nil {
		t.Fatal(err)
	}
	servetest.WaitFor(t, "the backup's log line", func() bool { return strings.Contains(p.log(), `"msg":"ledger backup written"`) })
	p.cmd.Process.Signal(syscall.SIGTERM)
	p.cmd.Wait()
	<-p.done
	if !strings.Contains(p.log(), `"msg":"ledger unavailable: releases stopped"`) {
		t.Errorf("no error line for the deleted ledger:\n%s", p.log())
	}
	found, _ := filepath.Glob(filepath.Join(backups, "ledger.db.backup-"+info.LedgerID[:8]+"-*"))
	if len(found) != 1 {
		t.Fatalf("backups %v", found)
	}
	backup := found[0]

	if _, stderr, code := runHelper(t, serveArgs...); code != 1 || !strings.Contains(stderr, "does not exist") {
		t.Fatalf("restart on the deleted ledger: exit %d\n%s", code, stderr)
	}
	if _, stderr, code := runHelper(t, "serve", "--model", "fake", "--ledger", backup, "--budget-epsilon", "1"); code != 1 ||
		!strings.Contains(stderr, "is a backup of ledger "+info.LedgerID) || !strings.Contains(stderr, "--accept-rollback") {
		t.Fatalf("serve on the backup: exit %d\n%s", code, stderr)
	}
	if _, stderr, code := runHelper(t, "serve", "ledger", "restore", "--backup", backup, "--ledger", ledger); code != 1 ||
		!strings.Contains(stderr, "rolls the ledger back") || !strings.Contains(stderr, "give --accept-rollback") {
		t.Fatalf("restore without --accept-rollback: exit %d\n%s", code, stderr)
	}
	// A live ledger is no backup: restored, it would be a second ledger
	// with the same ID.
	if _, stderr, code := runHelper(t, "serve", "ledger", "restore", "--backup", backup, "--ledger", ledger, "--accept-rollback"); code != 0 {
		t.Fatalf("restore: exit %d\n%s", code, stderr)
	}
	twin := filepath.Join(t.TempDir(), "twin.db")
	if _, stderr, code := runHelper(t, "serve", "ledger", "restore", "--backup", ledger, "--ledger", twin, "--accept-rollback"); code != 1 ||
		!strings.Contains(stderr, "--backup: restore of "+ledger) || !strings.Contains(stderr, "has no backup mark") {
		t.Fatalf("restore of a live ledger: exit %d\n%s", code, stderr)
	}
	os.Remove(ledger)
	if out, stderr, code := runHelper(t, "serve", "ledger", "restore", "--backup", backup, "--ledger", ledger, "--accept-rollback"); code != 0 ||
		!strings.Contains(out, `"from": "`+backup+`"`) {
		t.Fatalf("restore: exit %d %s\n%s", code, out, stderr)
	}
	p2 := startServe(t, ledger, keys, 0)
	code, body := p2.get(t, "/v1/budget", key)
	if code != 200 || body["budget"].(map[string]any)["releases"].(float64) != 3 {
		t.Fatalf("budget after the restore: %d %v", code, body)
	}
	if code, _ := p2.embedOne(t, key); code != 200 {
		t.Fatalf("release after the restore: %d", code)
	}
}

// TestServeCorruptLedger: a ledger truncated to 8-24 KiB or with random
// bytes over 8 KiB or 16 KiB makes `nvdp serve` and `nvdp serve ledger`
// exit 1 with "ledger FILE is corrupt: restore it from a backup" and the
// restore command: no crash, no stack trace (each runs as its own process,
// where a SIGBUS or a panic would show).
func TestServeCorruptLedger(t *testing.T) {
	dir := t.TempDir()
	ledger := filepath.Join(dir, "ledger.db")
	if _, err := nvledger.CreateFile(ledger); err != nil {
		t.Fatal(err)
	}
	l, err := nvledger.OpenFile(ledger)
	if err != nil {
		t.Fatal(err)
	}
	c, err := l.RegisterCurve(servetest.GaussianGuarantee(1e-4), map[string]string{"model": "fake"})
	if err != nil {
		t.Fatal(err)
	}
	for i := range 600 {
		if _, err := l.Charge(fmt.Sprintf("key-%04d", i), c, 1, 1e9); err != nil {
			t.Fatal(err)
		}
	}
	l.Close()
	good, err := os.ReadFile(ledger)
	if err != nil {
		t.Fatal(err)
	}
	if len(good) <= 24<<10 {
		t.Fatalf("set-up: the ledger has %d bytes", len(good))
	}
	rng := rand.New(rand.NewPCG(7, 8))
	cases := map[string][]byte{}
	for _, kib := range []int{8, 16, 24} {
		cases[fmt.Sprintf("truncated to %d KiB", kib)] = good[:kib<<10]
	}
	for _, off := range []int{8 << 10, 16 << 10} {
		b := append([]byte(nil), good...)
		for j := range 256 {
			b[off+j] = byte(rng.Uint32())
		}
		cases[fmt.Sprintf("random bytes at %d KiB", off>>10)] = b
	}
	for name, b := range cases {
		bad := filepath.Join(dir, "bad.db")
		if err := os.WriteFile(bad, b, 0o600); err != nil {
			t.Fatal(err)
		}
		for _, args := range [][]string{{"serve", "--model", "fake", "--addr", "127.0.0.1:0", "--ledger", bad, "--budget-epsilon", "1"}, {"serve", "ledger", "--ledger", bad}} {
			_, stderr, code := runHelper(t, args...)
			if code != 1 || !strings.Contains(stderr, "ledger "+bad+" is corrupt: restore it from a backup") ||
				!strings.Contains(stderr, "nvdp serve ledger restore --backup BACKUP --ledger "+bad) ||
				strings.Contains(stderr, "goroutine ") || strings.Contains(stderr, "panic") || strings.Contains(stderr, "SIGBUS") {
				t.Errorf("%s, nvdp %s: exit %d\n%s", name, strings.Join(args[:2], " "), code, stderr)
			}
		}
	}
}

// TestServeLedgerReadOut: `nvdp serve ledger` (and check) read a ledger
// without writing it: the file's bytes are the same after, and a read-only
// copy reads.
func TestServeLedgerReadOut(t *testing.T) {
	dir := t.TempDir()
	ledger := filepath.Join(dir, "ledger.db")
	if _, err := nvledger.CreateFile(ledger); err != nil {
		t.Fatal(err)
	}
	l, err := nvledger.OpenFile(ledger)
	if err != nil {
		t.Fatal(err)
	}
	c, _ := l.RegisterCurve(servetest.GaussianGuarantee(1e-3), nil)
	l.Charge("alice", c, 4, 1e9)
	l.Close()
	before, _ := os.ReadFile(ledger)
	os.Chmod(ledger, 0o444)
	out, err := runCmd(newServeCmd(), "ledger", "--ledger", ledger)
	var accts []nvledger.Account
	if err != nil || json.Unmarshal([]byte(out), &accts) != nil || len(accts) != 1 || accts[0].Releases != 4 {
		t.Fatalf("nvdp serve ledger: %v %s", err, out)
	}
	out, err = runCmd(newServeCmd(), "ledger", "check", "--ledger", ledger)
	var info nvledger.Info
	if err != nil || json.Unmarshal([]byte(out), &info) != nil || info.Accounts != 1 || info.Releases != 4 {
		t.Fatalf("nvdp serve ledger check: %v %s", err, out)
	}
	after, _ := os.ReadFile(ledger)
	if sha256.Sum256(before) != sha256.Sum256(after) {
		t.Fatal("reading the ledger changed its checksum")
	}
	bdir := t.TempDir()
	out, err = runCmd(newServeCmd(), "ledger", "backup", "--ledger", ledger, "--out", bdir)
	if err != nil || json.Unmarshal([]byte(out), &info) != nil || info.Backup == nil || filepath.Dir(info.Path) != bdir {
		t.Fatalf("nvdp serve ledger backup: %v %s", err, out)
	}
	if after, _ := os.ReadFile(ledger); sha256.Sum256(before) != sha256.Sum256(after) {
		t.Fatal("the backup changed the ledger's checksum")
	}
}

// TestServeReloadKeysOnSIGHUP: a running `nvdp serve` reads its keys file
// again on SIGHUP: a key appended since is served; a file that others may
// write is refused with an error line and the keys in use stay; the
// process lives on.
func TestServeReloadKeysOnSIGHUP(t *testing.T) {
	dir := t.TempDir()
	ledger, keys := filepath.Join(dir, "ledger.db"), filepath.Join(dir, "keys.txt")
	alice, bob := mustGenerateKey(t), mustGenerateKey(t)
	if err := serve.AppendKey(keys, "alice", alice, option.Auto()); err != nil {
		t.Fatal(err)
	}
	if _, err := nvledger.CreateFile(ledger); err != nil {
		t.Fatal(err)
	}
	p := startServe(t, ledger, keys, 0)
	if code, _ := p.embedOne(t, bob); code != 401 {
		t.Fatalf("bob before: %d", code)
	}
	if err := serve.AppendKey(keys, "bob", bob, option.Auto()); err != nil {
		t.Fatal(err)
	}
	if err := p.cmd.Process.Signal(syscall.SIGHUP); err != nil {
		t.Fatal(err)
	}
	servetest.WaitFor(t, "the reload", func() bool { return strings.Contains(p.log(), `"msg":"keys reloaded"`) })
	if code, _ := p.embedOne(t, bob); code != 200 {
		t.Fatalf("bob after SIGHUP: %d\n%s", code, p.log())
	}
	os.Chmod(keys, 0o666)
	p.cmd.Process.Signal(syscall.SIGHUP)
	servetest.WaitFor(t, "the refusal", func() bool {
		return strings.Contains(p.log(), `"msg":"SIGHUP: keys not reloaded; the keys in use stay"`)
	})
	if !strings.Contains(p.log(), "is writable by group or others") {
		t.Errorf("the refusal does not say why:\n%s", p.log())
	}
	for _, k := range []string{alice, bob} {
		if code, _ := p.embedOne(t, k); code != 200 {
			t.Errorf("a key after the refused reload: %d", code)
		}
	}
	if strings.Contains(p.log(), alice) || strings.Contains(p.log(), bob) {
		t.Error("the log holds a key")
	}
}

func mustGenerateKey(t *testing.T) string {
	k, err := serve.GenerateKey()
	if err != nil {
		t.Fatal(err)
	}
	return k
}

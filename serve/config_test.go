package serve_test

import (
	"errors"
	"log/slog"
	"math"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/nvdp-project/nvdp/ledger"
	"github.com/nvdp-project/nvdp/option"
	"github.com/nvdp-project/nvdp/serve"
	"github.com/nvdp-project/nvdp/serve/servetest"
)

// TestConfigCheck: the inputs of a serving process, alone and together,
// are checked before anything is opened, each error naming the input by
// its JSON key (the CLI's flag errors, cmd/nvdp TestServeFlagErrors, are
// these with flag names).
func TestConfigCheck(t *testing.T) {
	dir := t.TempDir()
	badKeys, noBudget, openKeys := servetest.BadKeyFiles(t, dir)
	file := filepath.Join(dir, "ledger%d.db") // a % in the location stays as it is
	budget := func(b float64) serve.Options { o := serve.DefaultOptions(); o.BudgetEpsilon = b; return o }
	tests := []struct {
		name   string
		c      serve.Config
		o      serve.Options
		err    string // "": none
		option string // the *option.Error's, or the first of a *option.CombinationError's
	}{
		{"a keys file", serve.Config{Model: "m", Ledger: file, Keys: noBudget}, budget(1), "", ""},
		{"no keys", serve.Config{Model: "m", Ledger: file}, budget(1), "", ""},
		{"the ledger's keys", serve.Config{Model: "m", Ledger: "postgres://h/db", LedgerHoldsKeys: true, KeysInLedger: true}, serve.DefaultOptions(), "", ""},
		{"no model", serve.Config{Ledger: file}, budget(1), "model: required (a model directory written by 'nvdp train' or 'nvdp run')", "model"},
		{"no ledger", serve.Config{Model: "m"}, budget(1), "ledger: required (a ledger file or a PostgreSQL URL, made once with 'nvdp serve ledger init')", "ledger"},
		{"negative budget", serve.Config{Model: "m", Ledger: file}, budget(-1), "budget_epsilon -1: must be >= 0", "budget_epsilon"},
		{"backup dir", serve.Config{Model: "m", Ledger: file}, func() serve.Options { o := budget(1); o.BackupDir = filepath.Join(dir, "none"); return o }(),
			"backup_dir \"" + filepath.Join(dir, "none") + "\": not a directory", "backup_dir"},
		{"no budget, no keys", serve.Config{Model: "m", Ledger: file}, serve.DefaultOptions(), "budget_epsilon: required without a keys file", "budget_epsilon"},
		{"key without budget", serve.Config{Model: "m", Ledger: file, Keys: noBudget}, serve.DefaultOptions(),
			"budget_epsilon: keys " + noBudget + `:1: key "alice" has no budget`, "budget_epsilon"},
		{"bad keys file", serve.Config{Model: "m", Ledger: file, Keys: badKeys}, budget(1), "keys: keys " + badKeys + ":1:", "keys"},
		{"keys file others may write", serve.Config{Model: "m", Ledger: file, Keys: openKeys}, budget(1),
			"keys: keys " + openKeys + " is writable by group or others (mode 0666)", "keys"},
		{"keys and keys in ledger", serve.Config{Model: "m", Ledger: "postgres://h/db", LedgerHoldsKeys: true, Keys: noBudget, KeysInLedger: true}, serve.DefaultOptions(),
			"keys and keys_in_ledger: give one (a keys file, or the PostgreSQL ledger's keys)", "keys"},
		{"keys in a file ledger", serve.Config{Model: "m", Ledger: file, KeysInLedger: true}, serve.DefaultOptions(),
			"keys_in_ledger: the keys are a PostgreSQL ledger's, and ledger " + file + " is a file", "keys_in_ledger"},
		{"budget with keys in the ledger", serve.Config{Model: "m", Ledger: "postgres://h/db", LedgerHoldsKeys: true, KeysInLedger: true}, budget(5),
			"budget_epsilon 5: has no effect with keys_in_ledger (each key of the database has its own budget: nvdp serve keys budget)", "budget_epsilon"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			keys, err := tc.c.Check(tc.o)
			if tc.err == "" {
				if err != nil {
					t.Fatal(err)
				}
				if (keys != nil) != (tc.c.Keys != "") {
					t.Fatalf("keys %v from the keys file %q", keys, tc.c.Keys)
				}
				return
			}
			if err == nil || !strings.HasPrefix(err.Error(), tc.err) {
				t.Fatalf("err = %v, want %q", err, tc.err)
			}
			var oe *option.Error
			var ce *option.CombinationError
			switch {
			case errors.As(err, &oe):
				if oe.Option != tc.option {
					t.Errorf("option %q, want %q", oe.Option, tc.option)
				}
			case errors.As(err, &ce):
				if ce.Options[0] != tc.option {
					t.Errorf("options %q, want %q first", ce.Options, tc.option)
				}
			default:
				t.Errorf("%T: neither an *option.Error nor a *option.CombinationError", err)
			}
		})
	}
}

// keyLedger is a ledger whose keys authenticate (as a PostgreSQL ledger's).
type keyLedger struct{ *ledger.File }

func (keyLedger) LookupKey(string) (*serve.Key, error) { return nil, nil }

// TestConfigKeySource: the keys file's keys, else the ledger's own when
// asked for, else none; a ledger without keys is an error.
func TestConfigKeySource(t *testing.T) {
	lg := servetest.OpenLedger(t)
	keys, err := serve.ParseKeys("keys.txt", strings.NewReader("alice "+hashOf("a")+" 1\n"))
	if err != nil {
		t.Fatal(err)
	}
	if ks, err := (serve.Config{Keys: "keys.txt"}).KeySource(keys, lg); err != nil || ks != serve.KeySource(keys) {
		t.Errorf("a keys file: %v, %v", ks, err)
	}
	if ks, err := (serve.Config{}).KeySource(nil, lg); err != nil || ks != nil {
		t.Errorf("no keys: %v, %v", ks, err)
	}
	kl := keyLedger{lg}
	if ks, err := (serve.Config{KeysInLedger: true}).KeySource(nil, kl); err != nil || ks != serve.KeySource(kl) {
		t.Errorf("the ledger's keys: %v, %v", ks, err)
	}
	if _, err := (serve.Config{KeysInLedger: true}).KeySource(nil, lg); err == nil || !strings.Contains(err.Error(), "holds no keys") {
		t.Errorf("a file ledger's keys: %v", err)
	}
}

// TestConfigNew: the server of a configuration authenticates with its key
// source (a file ledger cannot give the keys of --keys-in-ledger) and logs
// the ledger it opened.
func TestConfigNew(t *testing.T) {
	var logs strings.Builder
	log := slog.New(slog.NewTextHandler(&logs, nil))
	o := serve.DefaultOptions()
	o.BudgetEpsilon = 1
	if _, err := (serve.Config{KeysInLedger: true}).New(servetest.NewFake(3, 4, 0.1), servetest.OpenLedger(t), nil, o, log); err == nil || !strings.Contains(err.Error(), "holds no keys") {
		t.Errorf("keys in a file ledger: %v", err)
	}
	srv, err := (serve.Config{}).New(servetest.NewFake(3, 4, 0.1), servetest.OpenLedger(t), nil, o, log)
	if err != nil || srv == nil {
		t.Fatalf("no keys, one shared account: %v", err)
	}
	if !strings.Contains(logs.String(), "msg=\"ledger opened\"") || !strings.Contains(logs.String(), "format=") {
		t.Errorf("the ledger opened is not logged: %s", logs.String())
	}
}

// testSignal is a signal of the tests (os.Signal).
type testSignal string

func (s testSignal) String() string { return string(s) }
func (testSignal) Signal()          {}

const backup, reload = testSignal("backup"), testSignal("reload")

// TestHandleSignals: the backup signal writes a backup, the reload signal
// reads the keys file again (a file that does not read keeps the keys in
// use), and without a keys file the reload is logged and ignored.
func TestHandleSignals(t *testing.T) {
	bdir := t.TempDir()
	f := newFixture(t, 50, func(o *serve.Options) { o.BackupDir = bdir })
	keysPath := filepath.Join(t.TempDir(), "keys.txt")
	carol := mustKey(t)
	if err := serve.AppendKey(keysPath, "carol", carol, 5); err != nil {
		t.Fatal(err)
	}
	run := func(keysFile string, sigs ...os.Signal) {
		c := make(chan os.Signal, len(sigs))
		for _, s := range sigs {
			c <- s
		}
		close(c)
		f.srv.HandleSignals(c, backup, reload, keysFile)
	}
	run(keysPath, backup, reload, testSignal("other")) // ignored
	if code, _ := f.embed(t, carol, "x"); code != 200 {
		t.Errorf("carol after the reload: %d", code)
	}
	if code, _ := f.embed(t, f.alice, "x"); code != 401 {
		t.Errorf("alice, not in the file read again: %d", code)
	}
	backups, _ := filepath.Glob(filepath.Join(bdir, "*.backup-*"))
	if len(backups) != 1 {
		t.Errorf("backups %v, want 1", backups)
	}
	run(filepath.Join(t.TempDir(), "missing.txt"), reload)
	run("", reload)
	if code, _ := f.embed(t, carol, "x"); code != 200 {
		t.Errorf("carol after a reload that failed: %d", code)
	}
	logs := f.logs.String()
	for _, want := range []string{`"msg":"ledger backup written"`, `"msg":"keys reloaded"`, `"msg":"SIGHUP: keys not reloaded; the keys in use stay"`, `"msg":"SIGHUP: no keys file to read again"`} {
		if !strings.Contains(logs, want) {
			t.Errorf("logs without %s", want)
		}
	}
}

// TestNewFileKey: the key made authenticates as its ID with its budget
// (none: Auto) and is not in the file; missing inputs, a bad budget and a
// file that refuses the line are errors naming the option, and nothing is
// appended for them.
func TestNewFileKey(t *testing.T) {
	keys := filepath.Join(t.TempDir(), "keys.txt")
	for _, tc := range []struct {
		id     string
		budget float64
	}{{"alice", 0}, {"bob", option.Auto()}, {"carol", math.Inf(1)}} {
		key, err := serve.NewFileKey(keys, tc.id, tc.budget)
		if err != nil {
			t.Fatal(err)
		}
		k, err := serve.ReadKeys(keys)
		if err != nil {
			t.Fatal(err)
		}
		got := k.Lookup(key)
		if got == nil || got.ID != tc.id || !(got.Budget == tc.budget || option.IsAuto(got.Budget) && option.IsAuto(tc.budget)) {
			t.Errorf("%s: the key authenticates as %+v", tc.id, got)
		}
		if data, _ := os.ReadFile(keys); strings.Contains(string(data), key) {
			t.Errorf("%s: the keys file holds the key", tc.id)
		}
	}
	before, _ := os.ReadFile(keys)
	for _, tc := range []struct {
		name, keys, id string
		budget         float64
		options        []string
	}{
		{"no keys file", "", "dave", 1, []string{"keys", "id"}},
		{"no id", keys, "", 1, []string{"keys", "id"}},
		{"negative budget", keys, "dave", -2, []string{"budget_epsilon"}},
		{"-Inf budget", keys, "dave", math.Inf(-1), []string{"budget_epsilon"}},
		{"an ID of the file", keys, "alice", 1, []string{"keys"}},
		{"a bad ID", keys, "no spaces", 1, []string{"keys"}},
	} {
		_, err := serve.NewFileKey(tc.keys, tc.id, tc.budget)
		var oe *option.Error
		var ce *option.CombinationError
		switch {
		case len(tc.options) == 1 && errors.As(err, &oe) && oe.Option == tc.options[0]:
		case errors.As(err, &ce) && slices.Equal(ce.Options, tc.options):
		default:
			t.Errorf("%s: %v, want an error naming %q", tc.name, err, tc.options)
		}
	}
	if after, _ := os.ReadFile(keys); string(after) != string(before) {
		t.Errorf("refused keys were appended:\n%s", after)
	}
}

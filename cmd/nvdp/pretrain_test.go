package main

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"math/rand/v2"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/nvdp-project/nvdp/mlm"
	"github.com/nvdp-project/nvdp/progress"
)

// TestResolveInitFrom: --init-from with --resume or --config is refused
// before any work (mlm's TestResolveInitFrom resolves the specs).
func TestResolveInitFrom(t *testing.T) {
	dir := t.TempDir()
	// --init-from with --resume or --config is refused before any work.
	for _, args := range [][]string{
		{"--init-from", "hf:" + dir, "--resume", "--out", dir},
		{"--init-from", "hf:" + dir, "--config", "bert-tiny", "--corpus", dir, "--steps", "1", "--out", t.TempDir()},
	} {
		cmd := newPretrainCmd()
		cmd.SetArgs(args)
		cmd.SetOut(io.Discard)
		cmd.SetErr(io.Discard)
		if err := cmd.Execute(); err == nil || !strings.Contains(err.Error(), "--init-from") {
			t.Errorf("%v: %v", args, err)
		}
	}
}

// TestInitFromDownloadProgress: `nvdp pretrain --init-from hf:owner/name`
// reports the hub download through the command's progress (a log line per
// file where stderr is no terminal; it downloaded without any), and a
// missing corpus is found before the download starts.
func TestInitFromDownloadProgress(t *testing.T) {
	files := map[string]string{"/acme/tiny/resolve/main/config.json": `{"model_type": "bert"}`,
		"/acme/tiny/resolve/main/model.safetensors": strings.Repeat("x", 1<<12)}
	var gets int
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		b, ok := files[r.URL.Path]
		if !ok {
			http.NotFound(w, r)
			return
		}
		gets++
		http.ServeContent(w, r, "", time.Unix(0, 0), strings.NewReader(b))
	}))
	defer srv.Close()
	t.Setenv("HF_ENDPOINT", srv.URL)
	t.Setenv("HF_HUB_OFFLINE", "")
	t.Setenv("NVDP_HOME", t.TempDir())
	t.Setenv("NVDP_VOCAB", "")
	var logs bytes.Buffer
	prev := slog.Default()
	slog.SetDefault(slog.New(slog.NewTextHandler(&logs, nil)))
	defer slog.SetDefault(prev)

	corpus, _ := pretrainCorpus(t)
	out := filepath.Join(t.TempDir(), "run")
	args := []string{"--init-from", "hf:acme/tiny", "--steps", "1", "--out", out}
	if _, err := runCmd(newPretrainCmd(), append(args, "--corpus", "/nonexistent/corpus.txt")...); err == nil || !strings.Contains(err.Error(), "--corpus") || gets != 0 {
		t.Fatalf("missing corpus: %v after %d downloads, want a --corpus error before any", err, gets)
	}
	// The checkpoint has no tokenizer: the run fails after the download.
	if _, err := runCmd(newPretrainCmd(), append(args, "--corpus", corpus)...); err == nil || !strings.Contains(err.Error(), "tokenizer") {
		t.Fatalf("a checkpoint without a tokenizer: %v, want a tokenizer error", err)
	}
	for _, f := range []string{"config.json", "model.safetensors"} {
		if want := `stage="download acme/tiny/` + f + `"`; !strings.Contains(logs.String(), want) {
			t.Errorf("no progress line with %s in\n%s", want, logs.String())
		}
	}
	if _, err := os.Stat(out); !os.IsNotExist(err) {
		t.Errorf("%s was created (%v)", out, err)
	}

	var events []progress.Event
	if _, err := mlm.ResolveInitFrom("hf:acme/tiny", func(e progress.Event) { events = append(events, e) }); err != nil {
		t.Fatal(err)
	}
	if len(events) != 0 {
		t.Errorf("a cached model reported %d download events", len(events))
	}
}

// pretrainCorpus writes a corpus of 60 distinct lines over synthSST2's
// 13-token vocabulary and returns it and the vocabulary.
func pretrainCorpus(t *testing.T) (corpus, vocab string) {
	t.Helper()
	_, vocab = synthSST2(t, 4)
	words := []string{"good", "great", "bad", "awful", "the", "movie", "is", "very"}
	rng := rand.New(rand.NewPCG(3, 4))
	var b strings.Builder
	for i := range 60 {
		fmt.Fprintf(&b, "%s", words[i%len(words)])
		for range 3 + i%5 {
			fmt.Fprintf(&b, " %s", words[rng.IntN(len(words))])
		}
		fmt.Fprintf(&b, " %d\n", i) // distinct lines (the digits are [UNK])
	}
	corpus = filepath.Join(t.TempDir(), "corpus.txt")
	if err := os.WriteFile(corpus, []byte(b.String()), 0o644); err != nil {
		t.Fatal(err)
	}
	return corpus, vocab
}

// TestPretrainFlagsBindDefaults: the pretrain flags hold mlm.DefaultOptions()
// (--help shows the real defaults, the ones derived from others "auto"),
// and every option of mlm.Options has the flag its *option.Error names.
func TestPretrainFlagsBindDefaults(t *testing.T) {
	t.Setenv("NVDP_VOCAB", "")
	cmd := newPretrainCmd()
	if err := cmd.ParseFlags(nil); err != nil {
		t.Fatal(err)
	}
	fs := cmd.Flags()
	for flag, def := range map[string]string{"config": "bert-mini", "seq": "128", "batch-size": "64", "steps": "0", "lr": "0.0005",
		"warmup-ratio": "0.06", "weight-decay": "0.01", "grad-clip": "1", "mask-prob": "0.15", "holdout": "auto", "max-eval-seqs": "1024",
		"dropout": "auto", "seed": "1", "save-every": "500", "eval-every": "auto", "stop-after-steps": "0"} {
		if f := fs.Lookup(flag); f == nil || f.DefValue != def {
			t.Errorf("--%s default %v, want %q", flag, f, def)
		}
	}
	var help bytes.Buffer
	cmd.SetOut(&help)
	_ = cmd.Usage()
	for _, s := range []string{"--holdout int", "--eval-every int", "--dropout float", "(default auto)", "--seq int", "(default 128)", "(0: off)"} {
		if !strings.Contains(help.String(), s) {
			t.Errorf("--help lacks %q", s)
		}
	}
	rt := reflect.TypeFor[mlm.Options]()
	for i := range rt.NumField() {
		name, _, _ := strings.Cut(rt.Field(i).Tag.Get("json"), ",")
		switch name {
		case "options_version", "model_config", "-":
			continue
		}
		if fs.Lookup(optionFlag(name)) == nil {
			t.Errorf("option %s: no --%s", name, optionFlag(name))
		}
	}
	for _, name := range []string{"stop_after_steps", "steps", "save_every", "eval_every"} { // the options of a resume
		if fs.Lookup(optionFlag(name)) == nil {
			t.Errorf("option %s: no --%s", name, optionFlag(name))
		}
	}
}

// TestPretrainChecksBeforeWork: bad flags and missing files fail before any
// work, naming the flag, and create no --out; an explicit 0 is an error
// where it means nothing, never the default.
func TestPretrainChecksBeforeWork(t *testing.T) {
	t.Setenv("NVDP_VOCAB", "")
	corpus, vocab := pretrainCorpus(t)
	common := []string{"--corpus", corpus, "--vocab", vocab, "--config", "bert-tiny", "--steps", "2", "--batch-size", "2", "--seq", "16"}
	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"--steps", "0"}, "--steps 0: must be >= 1"},
		{[]string{"--batch-size", "0"}, "--batch-size 0: must be >= 1"},
		{[]string{"--seq", "4"}, "--seq 4: must be >= 8"},
		{[]string{"--seq", "1024"}, "--seq 1024: exceeds the model's 512 positions"},
		{[]string{"--lr", "0"}, "--lr 0: must be > 0"},
		{[]string{"--grad-clip", "-1"}, "--grad-clip -1: must be >= 0 (0: no clipping)"},
		{[]string{"--grad-clip", "NaN"}, "--grad-clip NaN: must be a finite number"},
		{[]string{"--mask-prob", "0"}, "--mask-prob 0: must be in (0, 1)"},
		{[]string{"--holdout", "0"}, "--holdout 0: must be >= 1"},
		{[]string{"--holdout", "-1"}, `invalid argument "-1" for "--holdout" flag`},
		{[]string{"--holdout", "60"}, "leaves none of the 60 for training"},
		{[]string{"--max-eval-seqs", "0"}, "--max-eval-seqs 0: must be >= 1"},
		{[]string{"--dropout", "1"}, "--dropout 1: must be in [0, 1)"},
		{[]string{"--dropout", "NaN"}, `invalid argument "NaN" for "--dropout" flag`},
		{[]string{"--save-every", "-1"}, "--save-every -1: must be >= 0"},
		{[]string{"--eval-every", "-1"}, `invalid argument "-1" for "--eval-every" flag`},
		{[]string{"--stop-after-steps", "-1"}, "--stop-after-steps -1: must be >= 0"},
		{[]string{"--warmup-ratio", "1"}, "--warmup-ratio 1: must be in [0, 1)"},
		{[]string{"--weight-decay", "-0.1"}, "--weight-decay -0.1: must be >= 0"},
		{[]string{"--corpus", "/nonexistent/c.txt"}, `--corpus "/nonexistent/c.txt": stat /nonexistent/c.txt: no such file`},
		{[]string{"--corpus", "glue:/nonexistent"}, `--corpus "glue:/nonexistent": not a directory`},
		{[]string{"--vocab", "/nonexistent/vocab.txt"}, `--vocab "/nonexistent/vocab.txt"`},
		{[]string{"--config", "bert-huge"}, `--config "bert-huge": neither a config.json file nor a preset`},
		{[]string{"--corpus", ""}, "--corpus: required"},
		{[]string{"--vocab", ""}, "--vocab: required"},
	} {
		out := filepath.Join(t.TempDir(), "run")
		args := append(append(append([]string{}, common...), tc.args...), "--out", out)
		if _, err := runCmd(newPretrainCmd(), args...); err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%v: error %v, want %q", tc.args, err, tc.want)
		}
		if _, err := os.Stat(out); !os.IsNotExist(err) {
			t.Errorf("%v: %s was created (%v)", tc.args, out, err)
		}
	}
	if _, err := runCmd(newPretrainCmd(), common...); err == nil || !strings.Contains(err.Error(), "--out: required") {
		t.Errorf("no --out: %v", err)
	}
	if _, err := runCmd(newPretrainCmd(), "--corpus", corpus, "--vocab", vocab, "--out", t.TempDir()); err == nil ||
		!strings.Contains(err.Error(), "--steps 0: must be >= 1 (the number of optimizer steps: required)") {
		t.Errorf("no --steps: %v", err)
	}
}

// TestPretrainExplicitZerosAndResume: `nvdp pretrain` keeps explicit zeros
// (--grad-clip 0 is no clipping, --save-every 0 and --eval-every 0 only at
// the end, --dropout 0) where it used to put the defaults, and saves the
// resolved options; --resume refuses the flags of the saved options and
// changes --steps and --eval-every, checked as a new run's.
func TestPretrainExplicitZerosAndResume(t *testing.T) {
	t.Setenv("NVDP_VOCAB", "")
	corpus, vocab := pretrainCorpus(t)
	out := filepath.Join(t.TempDir(), "run")
	if _, err := runCmd(newPretrainCmd(), "--corpus", corpus, "--vocab", vocab, "--config", "bert-tiny", "--steps", "2", "--batch-size", "2",
		"--seq", "16", "--grad-clip", "0", "--save-every", "0", "--eval-every", "0", "--dropout", "0", "--out", out, "--json"); err != nil {
		t.Fatal(err)
	}
	saved := func() map[string]any {
		t.Helper()
		b, err := os.ReadFile(filepath.Join(out, mlm.OptionsFile))
		if err != nil {
			t.Fatal(err)
		}
		var m map[string]any
		if err := json.Unmarshal(b, &m); err != nil {
			t.Fatal(err)
		}
		return m
	}
	want := map[string]any{"options_version": 1.0, "grad_clip": 0.0, "save_every": 0.0, "eval_every": 0.0, "dropout": 0.0, "holdout": 6.0,
		"steps": 2.0, "lr": 5e-4, "seq": 16.0}
	check := func(when string) {
		m := saved()
		for k, v := range want {
			if m[k] != v {
				t.Errorf("%s: saved %s %v, want %v", when, k, m[k], v)
			}
		}
	}
	check("first run")
	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"--lr", "1e-3", "--seq", "32"}, "--lr, --seq: a resumed run uses the options saved in pretrain_options.json"},
		{[]string{"--steps", "0"}, "--steps 0: must be >= 1"},
		{[]string{"--save-every", "-1"}, "--save-every -1: must be >= 0"},
	} {
		if _, err := runCmd(newPretrainCmd(), append([]string{"--resume", "--out", out}, tc.args...)...); err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("--resume %v: %v, want %q", tc.args, err, tc.want)
		}
	}
	check("refused resumes")
	if _, err := runCmd(newPretrainCmd(), "--resume", "--out", out, "--steps", "4", "--eval-every", "1"); err != nil {
		t.Fatal(err)
	}
	want["steps"], want["eval_every"] = 4.0, 1.0
	check("resumed run")
}

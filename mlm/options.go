package mlm

import (
	"bytes"
	"encoding/json"
	"fmt"
	"math"
	"os"
	"path/filepath"
	"strings"

	"github.com/nvdp-project/nvdp/encoder"
	"github.com/nvdp-project/nvdp/internal/fsutil"
	"github.com/nvdp-project/nvdp/option"
)

// Options configure [Run]. Start from [DefaultOptions]: every field holds the
// value it says, an explicit 0 included, and a zero value is never replaced
// by a default. The options whose default depends on other things hold
// [option.AutoInt] or [option.Auto] until [Options.Resolve] derives them:
// Holdout depends on the corpus, EvalEvery on Steps, and Dropout on the model
// config. [Options.Validate] checks the options; its errors are
// [*option.Error] naming the option by its JSON key, as
// pretrain_options.json stores it.
type Options struct {
	// Version is the pretrain_options.json format (optionsVersion, 1; 0 in files
	// written before the explicit defaults, which a resume upgrades).
	Version int `json:"options_version"`
	// Corpus is a text file, a directory of .txt files, or a GLUE directory
	// (glue:DIR, or auto-detected), read line by line into documents. Required.
	Corpus string `json:"corpus"`
	// Config is a preset (bert-tiny, bert-mini, ...; DefaultConfig) or a
	// config.json path. InitFrom's config.json, and ModelConfig when set
	// (tests, resume), replace it.
	Config string `json:"config"`
	// InitFrom, when set, is a Hugging Face BERT directory (config.json +
	// model.safetensors: a BertForMaskedLM as Save writes it or as the hub
	// has it, or a BertModel) whose weights start the run instead of a random
	// initialisation: continued, domain-adaptive pretraining (Gururangan et
	// al. 2020). Its config.json replaces Config; the MLM head is loaded when
	// the checkpoint has one and initialised fresh (decoder tied) when not.
	InitFrom    string          `json:"init_from,omitempty"`
	ModelConfig *encoder.Config `json:"model_config,omitempty"`
	// Vocab is the tokenizer (vocab.txt, tokenizer.json or a directory); it is
	// copied into Out. The model's vocab_size is set to the tokenizer's.
	// Required, except with InitFrom, whose tokenizer files are the default.
	Vocab string `json:"vocab"`
	Out   string `json:"out"` // the output directory (required)
	// Seq is the maximum sequence length in tokens, specials included
	// (>= MinSeq, at most the model's positions).
	Seq int `json:"seq"`
	// BatchSize is the number of sequences per step (>= 1).
	BatchSize int `json:"batch_size"`
	// Steps is the number of optimizer steps (>= 1; DefaultOptions leaves it
	// 0: the caller gives it).
	Steps int `json:"steps"`
	// LR is the peak learning rate (> 0), reached after WarmupRatio*Steps
	// steps of linear warm-up and decayed linearly to 0 at Steps (HF
	// get_linear_schedule_with_warmup). WarmupRatio is in [0, 1).
	LR          float64 `json:"lr"`
	WarmupRatio float64 `json:"warmup_ratio"`
	// WeightDecay is AdamW's decoupled decay (>= 0; BERT: 0.01), not applied
	// to biases and LayerNorm parameters. AdamW betas nn.AdamBeta1,
	// nn.AdamBeta2 and eps nn.BERTAdamEps, as BERT.
	WeightDecay float64 `json:"weight_decay"`
	// GradClip is the global L2 gradient-norm bound (>= 0; 0: no clipping),
	// as model.Options.GradClip.
	GradClip float64 `json:"grad_clip"`
	// MaskProb is the fraction of tokens predicted, in (0, 1).
	MaskProb  float64 `json:"mask_prob"`
	WholeWord bool    `json:"whole_word"`
	// NoPack makes every line its own sequence instead of packing
	// consecutive lines up to Seq tokens.
	NoPack bool `json:"no_pack"`
	// Holdout is the number of held-out documents (>= 1, fewer than the
	// corpus's). AutoInt: DefaultHoldout of the corpus's documents.
	Holdout int `json:"holdout"`
	// MaxEvalSeqs caps the held-out sequences evaluated (>= 1).
	MaxEvalSeqs int `json:"max_eval_seqs"`
	// Dropout is the encoder's hidden and attention dropout, in [0, 1). Auto:
	// the model config's (0.1 for the presets).
	Dropout float64 `json:"dropout"`
	Seed    uint64  `json:"seed"`
	// SaveEvery writes a checkpoint (and exports the model) every K steps
	// (>= 0; 0: only when the run ends or stops). EvalEvery evaluates the
	// held-out slice, with a "train" metrics line, every K steps (>= 0; 0:
	// only at the end of a session, when the run ends or stops). AutoInt:
	// DefaultEvalEvery(Steps).
	SaveEvery int `json:"save_every"`
	EvalEvery int `json:"eval_every"`

	// Resume continues the run in Out from its checkpoint with the options
	// saved there (validated again); the other fields of o are ignored,
	// except StopAfterSteps and Change.
	Resume bool `json:"-"`
	// Change lists the saved options a resumed run replaces (Resume only).
	Change Change `json:"-"`
	// StopAfterSteps stops (with a checkpoint, resumable) after this many
	// steps in total (>= 0; 0: off).
	StopAfterSteps int `json:"-"`
}

// Change lists the saved options that a resumed run replaces; a nil field
// keeps the saved value. A changed Steps changes the learning-rate schedule
// from the current step on, so that the linear decay ends at the new Steps.
// An AutoInt EvalEvery is [DefaultEvalEvery] of the new Steps.
type Change struct {
	Steps, SaveEvery, EvalEvery *int
}

// apply writes the changed options into o.
func (c Change) apply(o *Options) {
	for _, f := range []struct{ from, to *int }{{c.Steps, &o.Steps}, {c.SaveEvery, &o.SaveEvery}, {c.EvalEvery, &o.EvalEvery}} {
		if f.from != nil {
			*f.to = *f.from
		}
	}
}

// optionsVersion is the format of pretrain_options.json that Run writes:
// every option explicit. Version 0 files (no options_version) used 0 for
// "the default" in seq, batch_size, lr, grad_clip, mask_prob,
// max_eval_seqs, save_every, eval_every and holdout, a negative grad_clip
// for "no clipping", and left dropout out for "the config's".
const optionsVersion = 1

// DefaultConfig is the model preset of a run that names none.
const DefaultConfig = "bert-mini"

// MinSeq is the shortest sequence length: [CLS] A [SEP] B [SEP] with room
// for a few tokens.
const MinSeq = 8

// DefaultOptions returns the defaults of every option, BERT's recipe scaled
// to small models: config [DefaultConfig], sequences of 128 tokens, 64 per
// batch, peak learning rate 5e-4 with 6% warm-up, weight decay 0.01,
// gradient clipping at norm 1, [DefaultMaskProb], packed lines, at most 1024
// held-out sequences evaluated, seed 1, and a checkpoint every 500 steps.
// Holdout and EvalEvery are [option.AutoInt] and Dropout is [option.Auto],
// for [Options.Resolve] to derive. Corpus, Vocab, Out and Steps are left to
// the caller.
func DefaultOptions() Options {
	return Options{Version: optionsVersion, Config: DefaultConfig, Seq: 128, BatchSize: 64, LR: 5e-4, WarmupRatio: 0.06,
		WeightDecay: 0.01, GradClip: 1, MaskProb: DefaultMaskProb, Holdout: option.AutoInt, MaxEvalSeqs: 1024,
		Dropout: option.Auto(), Seed: 1, SaveEvery: 500, EvalEvery: option.AutoInt}
}

// DefaultHoldout returns the size of the held-out slice of a corpus of the
// given number of documents: 1%, but at least min(100, 10%) and at least 1,
// so that a small corpus still gets a measurable slice.
func DefaultHoldout(documents int) int {
	return max(1, documents/100, min(100, documents/10))
}

// DefaultEvalEvery returns the held-out evaluation interval of a run of the
// given number of steps: steps/20, for 20 evaluations, and at least 1.
func DefaultEvalEvery(steps int) int { return max(1, steps/20) }

// Resolve replaces each Auto option by its default, given what it depends
// on, and is idempotent. EvalEvery becomes [DefaultEvalEvery](Steps);
// Holdout becomes [DefaultHoldout](documents), counting the corpus's
// documents as readCorpus returns them; and Dropout becomes the model
// config's hidden dropout. Options given explicitly, 0 included, are kept.
//
// An Auto Dropout with a config whose hidden and attention dropout differ is
// an [*option.Error]: Dropout sets both, so it must be given.
func (o *Options) Resolve(model encoder.Config, documents int) error {
	if o.EvalEvery == option.AutoInt {
		o.EvalEvery = DefaultEvalEvery(o.Steps)
	}
	if o.Holdout == option.AutoInt {
		o.Holdout = DefaultHoldout(documents)
	}
	if option.IsAuto(o.Dropout) {
		if model.HiddenDropoutProb != model.AttentionProbsDropoutProb {
			return option.Errorf("dropout", nil, "auto, but the model config's hidden dropout %v and attention dropout %v differ: give the one value for both",
				model.HiddenDropoutProb, model.AttentionProbsDropoutProb)
		}
		o.Dropout = model.HiddenDropoutProb
	}
	return nil
}

// Validate checks the options, Auto or resolved: the required ones given,
// every count and rate in its range, and every float finite. It reads no
// file; [Options.CheckFiles] does. Its errors are [*option.Error].
func (o *Options) Validate() error {
	for _, r := range []struct {
		option, value, want string
	}{{"corpus", o.Corpus, "a text file, a directory of .txt files or glue:DIR"}, {"out", o.Out, "the output directory"}} {
		if r.value == "" {
			return option.Errorf(r.option, nil, "required: %s", r.want)
		}
	}
	if o.Vocab == "" && o.InitFrom == "" {
		return option.Errorf("vocab", nil, "required: a WordPiece vocab.txt, tokenizer.json or a directory with them (init_from has its own)")
	}
	if o.Config == "" && o.InitFrom == "" && o.ModelConfig == nil {
		return option.Errorf("config", nil, "required: a preset (%s) or a config.json", strings.Join(encoder.PresetNames(), ", "))
	}
	for _, c := range []struct {
		option string
		v, lo  int
		auto   bool
		means  string
	}{{"steps", o.Steps, 1, false, " (the number of optimizer steps: required)"}, {"seq", o.Seq, MinSeq, false, ""},
		{"batch_size", o.BatchSize, 1, false, ""}, {"holdout", o.Holdout, 1, true, ""}, {"max_eval_seqs", o.MaxEvalSeqs, 1, false, ""},
		{"save_every", o.SaveEvery, 0, false, " (0: only when the run ends or stops)"},
		{"eval_every", o.EvalEvery, 0, true, " (0: only at the end of a session)"}, {"stop_after_steps", o.StopAfterSteps, 0, false, " (0: off)"}} {
		if c.v < c.lo && !(c.auto && c.v == option.AutoInt) {
			return option.Errorf(c.option, c.v, "must be >= %d%s", c.lo, c.means)
		}
	}
	for _, f := range []struct {
		option string
		v      float64
		auto   bool
		lo, hi float64 // the range [lo, hi) or, with open, (lo, hi)
		open   bool
		reason string
	}{{"lr", o.LR, false, 0, math.Inf(1), true, "must be > 0"},
		{"warmup_ratio", o.WarmupRatio, false, 0, 1, false, "must be in [0, 1)"},
		{"weight_decay", o.WeightDecay, false, 0, math.Inf(1), false, "must be >= 0"},
		{"grad_clip", o.GradClip, false, 0, math.Inf(1), false, "must be >= 0 (0: no clipping)"},
		{"mask_prob", o.MaskProb, false, 0, 1, true, "must be in (0, 1)"},
		{"dropout", o.Dropout, true, 0, 1, false, "must be in [0, 1)"}} {
		switch {
		case f.auto && option.IsAuto(f.v):
		case math.IsNaN(f.v) || math.IsInf(f.v, 0):
			return option.Errorf(f.option, f.v, "must be a finite number")
		case f.v < f.lo || f.v >= f.hi || (f.open && f.v == f.lo):
			return option.Errorf(f.option, f.v, "%s", f.reason)
		}
	}
	return nil
}

// CheckFiles checks the files a run of o reads, before any work: the corpus,
// a file or directory, or a directory for glue:DIR; the tokenizer;
// InitFrom's config.json; and Config, a preset or a config.json, when
// neither ModelConfig nor InitFrom replaces it. Its errors are
// [*option.Error] naming the path.
func (o *Options) CheckFiles() error {
	if dir, ok := strings.CutPrefix(o.Corpus, "glue:"); ok {
		if st, err := os.Stat(dir); err != nil || !st.IsDir() {
			return option.Errorf("corpus", o.Corpus, "not a directory (a GLUE directory with <TASK>/{train,test}.tsv)")
		}
	} else if _, err := os.Stat(o.Corpus); err != nil {
		return option.Errorf("corpus", o.Corpus, "%v", err)
	}
	if o.Vocab != "" {
		if _, err := os.Stat(o.Vocab); err != nil {
			return option.Errorf("vocab", o.Vocab, "%v", err)
		}
	}
	switch {
	case o.ModelConfig != nil:
	case o.InitFrom != "":
		if !fsutil.IsFile(filepath.Join(o.InitFrom, encoder.ConfigFile)) {
			return option.Errorf("init_from", o.InitFrom, "not a Hugging Face directory (no %s)", encoder.ConfigFile)
		}
	case !fsutil.IsFile(o.Config):
		if _, err := encoder.Preset(o.Config); err != nil {
			return option.Errorf("config", o.Config, "neither a config.json file nor a preset: %v", err)
		}
	}
	return nil
}

// optionsFields is Options without its JSON methods.
type optionsFields Options

// MarshalJSON writes o with the Auto options, Holdout, Dropout and
// EvalEvery, as null. The options a run saves are resolved and have none.
func (o Options) MarshalJSON() ([]byte, error) {
	j := struct {
		optionsFields
		Holdout   *int     `json:"holdout"`
		Dropout   *float64 `json:"dropout"`
		EvalEvery *int     `json:"eval_every"`
	}{optionsFields: optionsFields(o)}
	if o.Holdout != option.AutoInt {
		j.Holdout = &o.Holdout
	}
	if !option.IsAuto(o.Dropout) {
		j.Dropout = &o.Dropout
	}
	if o.EvalEvery != option.AutoInt {
		j.EvalEvery = &o.EvalEvery
	}
	return json.Marshal(j)
}

// UnmarshalJSON reads o as MarshalJSON writes it: null or a missing key is
// Auto in the options that may be Auto; a key that is no option is an error.
func (o *Options) UnmarshalJSON(b []byte) error {
	f := optionsFields{Holdout: option.AutoInt, Dropout: option.Auto(), EvalEvery: option.AutoInt} // JSON null leaves a number as it is
	dec := json.NewDecoder(bytes.NewReader(b))
	dec.DisallowUnknownFields() // a misspelt or newer option is an error, never ignored
	if err := dec.Decode(&f); err != nil {
		return err
	}
	*o = Options(f)
	return nil
}

// readOptions reads a run's pretrain_options.json, upgrades a version-0 file
// (upgradeV0) and validates the options: a resumed run's options are checked
// as a new run's are. Errors name the file.
func readOptions(path string) (Options, error) {
	var o Options
	b, err := os.ReadFile(path)
	if err != nil {
		return o, err
	}
	if err := json.Unmarshal(b, &o); err != nil {
		return o, fmt.Errorf("%s: %w", path, err)
	}
	switch o.Version {
	case 0:
		o.upgradeV0()
	case optionsVersion:
	default:
		return o, fmt.Errorf("%s: options_version %d: this program reads versions 0 and %d", path, o.Version, optionsVersion)
	}
	if err := o.Validate(); err != nil {
		return o, fmt.Errorf("%s: %w", path, err)
	}
	return o, nil
}

// upgradeV0 gives the options of a version-0 file their explicit values, as
// that code's defaults gave them: 0 meant DefaultOptions' value in seq,
// batch_size, lr, grad_clip, mask_prob, max_eval_seqs and save_every, and
// Auto in eval_every and holdout (a holdout <= 0 was DefaultHoldout); a
// negative grad_clip meant no clipping, now 0. A missing dropout (the
// config's) decodes as Auto already. The result trains as that code did
// (TestResumeVersion0).
func (o *Options) upgradeV0() {
	d := DefaultOptions()
	for _, f := range []struct {
		v   *int
		def int
	}{{&o.Seq, d.Seq}, {&o.BatchSize, d.BatchSize},
		{&o.MaxEvalSeqs, d.MaxEvalSeqs}, {&o.SaveEvery, d.SaveEvery}, {&o.EvalEvery, option.AutoInt}} {
		if *f.v == 0 {
			*f.v = f.def
		}
	}
	for _, f := range []struct {
		v   *float64
		def float64
	}{{&o.LR, d.LR}, {&o.GradClip, d.GradClip}, {&o.MaskProb, d.MaskProb}} {
		if *f.v == 0 {
			*f.v = f.def
		}
	}
	if o.Holdout <= 0 {
		o.Holdout = option.AutoInt
	}
	if o.GradClip < 0 {
		o.GradClip = 0
	}
	o.Version = optionsVersion
}

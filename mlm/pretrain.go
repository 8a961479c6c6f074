package mlm

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"math"
	"math/rand/v2"
	"os"
	"path/filepath"
	"slices"
	"time"

	"github.com/nvdp-project/nvdp/encoder"
	"github.com/nvdp-project/nvdp/internal/atomicfile"
	"github.com/nvdp-project/nvdp/internal/fsutil"
	"github.com/nvdp-project/nvdp/internal/loop"
	"github.com/nvdp-project/nvdp/internal/rngstream"
	"github.com/nvdp-project/nvdp/nn"
	"github.com/nvdp-project/nvdp/option"
	"github.com/nvdp-project/nvdp/progress"
	"github.com/nvdp-project/nvdp/tokenize"
)

// Files a pretraining run writes into its output directory, besides the
// Hugging Face files config.json, model.safetensors and the tokenizer files.
const (
	stateFile   = "pretrain_state.safetensors" // checkpoint: parameters, AdamW moments, data position, RNG states
	OptionsFile = "pretrain_options.json"      // the run's options (used by a resume)
	metricsFile = "pretrain_metrics.jsonl"     // one JSON object per line: train interval and held-out evaluations
	summaryFile = "pretrain_summary.json"      // final Result
)

// Metric is one line of pretrain_metrics.jsonl. Split "train" summarises the
// steps since the previous line, with the loss the mean over their masked
// tokens; "heldout" is an evaluation of the held-out slice with fixed masks.
type Metric struct {
	Step         int     `json:"step"`
	Split        string  `json:"split"`
	Loss         float64 `json:"loss"`
	MaskedAcc    float64 `json:"masked_acc"`
	MaskedTokens int     `json:"masked_tokens"`
	LR           float64 `json:"lr,omitempty"`
	ElapsedS     float64 `json:"elapsed_s"`
	StepsPerS    float64 `json:"steps_per_s,omitempty"`
}

// Result is the summary of a run, written to pretrain_summary.json and as
// the CLI's JSON.
type Result struct {
	Out             string     `json:"out"`
	Backend         string     `json:"backend"`
	Config          string     `json:"config"`
	NumParams       int        `json:"num_params"`
	Corpus          CorpusInfo `json:"corpus"`
	TrainSequences  int        `json:"train_sequences"`
	TrainTokens     int        `json:"train_tokens"`
	HeldOutDocs     int        `json:"heldout_documents"`
	HeldOutSeqs     int        `json:"heldout_sequences"`
	Steps           int        `json:"steps"`
	Epochs          float64    `json:"epochs"`
	InitialHeldOut  *Metric    `json:"initial_heldout,omitempty"`
	FinalHeldOut    Metric     `json:"final_heldout"`
	ElapsedS        float64    `json:"elapsed_s"`
	StoppedEarly    bool       `json:"stopped_early,omitempty"`
	MaskedTokensPct float64    `json:"masked_tokens_pct"`
}

// Errors of [Run] for an output directory that holds a run when
// Options.Resume is not set, or holds none to resume.
var (
	ErrRunExists    = loop.ErrRunExists
	ErrNoCheckpoint = loop.ErrNoCheckpoint
)

// The checkpoint state (internal/loop's object under stateKey) and the keys
// of the random sources in it.
const (
	stateKey   = "pretrain_state"
	maskKey    = "mask_rng"
	dropoutKey = "dropout_rng"
)

// interval is the run's resumable state beyond the loop's: the sums of the
// training steps since the last "train" metrics line, so that a resumed run
// writes the lines an uninterrupted one does.
type interval struct {
	Masked  int     `json:"masked"`
	Correct int     `json:"correct"`
	LossSum float64 `json:"loss_sum"` // sum of the steps' mean loss times their masked tokens
}

// Run pretrains a BERT encoder with the MLM objective and writes the Hugging
// Face directory, the checkpoint, the metrics and the resolved options into
// o.Out. The package documentation and docs/pretraining.md describe the
// method.
//
// Run is [Prepare] then [Prepared.Run]. Every input is checked once, before
// any work and before o.Out is created: the options, with
// [Options.Validate], and for a resumed run its saved options again, with
// o.Change; the files, with [Options.CheckFiles]; the tokenizer;
// the model config; the corpus; and the Auto options resolved from them, with
// [Options.Resolve]. An invalid option of a new run, or a changed one of a
// resumed run, is a bare [*option.Error]; one read from the saved options
// file is wrapped with the file's path.
//
// The training loop is internal/loop's. report, when not nil, receives a
// progress event per step, with stage "pretrain", unit "steps" and the step's
// loss. StopAfterSteps stops with a checkpoint and sets Result.StoppedEarly.
// Cancelling ctx stops before the next step with a checkpoint and returns a
// [*loop.Interrupted] error that unwraps to ctx.Err(). A directory that holds
// a run without o.Resume is [ErrRunExists]; o.Resume without one is
// [ErrNoCheckpoint].
//
// Resuming is bitwise: the data order of epoch e is a permutation drawn from
// rngstream.PretrainOrder, and the masking and dropout PCG states, the AdamW
// moments and the step are restored from the checkpoint, including one
// written before the loop was shared.
func Run(ctx context.Context, o Options, report progress.Func) (*Result, error) {
	c, err := Prepare(o, report)
	if err != nil {
		return nil, err
	}
	return c.Run(ctx, report)
}

// Run pretrains as [Run] does, with the options [Prepare] checked.
func (c Prepared) Run(ctx context.Context, report progress.Func) (*Result, error) {
	p, err := newPretrainer(c.o)
	if err != nil {
		return nil, err
	}
	run, err := p.open(report)
	if err != nil {
		return nil, err
	}
	if p.o.Resume {
		st := run.State()
		slog.Info("pretrain: resumed", "dir", p.o.Out, "step", st.Step, "epoch", st.Epoch+1)
	}
	p.o.Version = optionsVersion
	if err := atomicfile.WriteJSON(p.optsPath, p.o); err != nil { // resolved; on resume: a changed Steps/SaveEvery/EvalEvery
		return nil, fmt.Errorf("pretrain: %w", err)
	}
	p.logStart()
	if !p.o.Resume {
		m := p.evaluate(0)
		p.initialHeldOut = &m
		if err := run.Log(m); err != nil {
			return nil, err
		}
	}
	if err := run.Train(ctx); err != nil {
		return nil, fmt.Errorf("pretrain: %w", err)
	}
	return p.finish()
}

// pretrainer is one pretraining run of Run: its checked options and inputs
// (newPretrainer), the model and its random sources, and, once open, the
// loop whose hooks are its step and afterStep.
type pretrainer struct {
	o                   Options // checked and resolved
	statePath, optsPath string

	tok         tokenize.Tokenizer
	tokFiles    []string // exported with the model
	cfg         encoder.Config
	corpus      CorpusInfo
	seqs, held  []Sequence // training sequences; held-out ones (at most MaxEvalSeqs)
	heldDocs    int
	trainTokens int
	masker      *masker
	evalBatches []*Batch // the held-out sequences, masked once

	model            *Model
	params           []*nn.Param
	maskSrc, dropSrc *rand.PCG
	maskRng, dropRng *rand.Rand

	run *loop.Run
	// The training steps since the last "train" line: their sums (resumable,
	// the loop's State) and, for the speed, this session's count and start.
	sums         interval
	sessionSteps int
	since        time.Time
	lastLR       float64

	initialHeldOut *Metric // a new run's evaluation at step 0
	finalHeldOut   Metric  // the last evaluation (Split "" before one)
}

// newPretrainer checks the options (checkOptions) and reads and checks every
// input (readInputs) before it creates o.Out; then it builds the model
// (initialised, or copied from o.InitFrom) and the random sources.
func newPretrainer(o Options) (*pretrainer, error) {
	p := &pretrainer{o: o, statePath: filepath.Join(o.Out, stateFile), optsPath: filepath.Join(o.Out, OptionsFile)}
	if err := p.readInputs(); err != nil {
		return nil, err
	}
	// Every input is read and checked: the run's files from here.
	if err := os.MkdirAll(o.Out, 0o755); err != nil {
		return nil, fmt.Errorf("pretrain: %w", err)
	}
	if err := p.newModel(); err != nil {
		return nil, err
	}
	return p, nil
}

// readInputs loads the tokenizer and the model config, prepares the corpus
// (prepareCorpus) and masks the held-out sequences.
func (p *pretrainer) readInputs() error {
	o := &p.o
	tok, err := tokenize.Load(o.Vocab)
	if err != nil {
		return fmt.Errorf("pretrain: %w", err)
	}
	if tok.Kind() != "wordpiece" {
		return fmt.Errorf("pretrain: tokenizer %s is %s; only BERT WordPiece vocabularies are supported", o.Vocab, tok.Kind())
	}
	p.tok, p.tokFiles = tok, []string{o.Vocab}
	if st, err := os.Stat(o.Vocab); err == nil && st.IsDir() {
		p.tokFiles = encoder.TokenizerFiles(o.Vocab)
	}
	if p.cfg, err = o.modelConfig(tok); err != nil {
		return o.inputError(p.optsPath, err)
	}
	if err := p.prepareCorpus(); err != nil {
		return err
	}
	masker, err := newMasker(tok.MaskID(), p.cfg.VocabSize, []int{tok.PadID(), tok.CLSID(), tok.SEPID(), tok.UnkID()}, o.WholeWord)
	if err != nil {
		return fmt.Errorf("pretrain: vocabulary %s: %w", o.Vocab, err)
	}
	masker.Prob = o.MaskProb
	p.masker = masker
	p.evalBatches = heldOutBatches(p.held, o.BatchSize, masker, rngstream.PretrainEvalMask.Rand(o.Seed, 0), tok.PadID())
	return nil
}

// prepareCorpus reads the corpus, resolves the Auto options from it and the
// model config (the dropout into the config, the config into
// o.ModelConfig), then splits and packs it.
func (p *pretrainer) prepareCorpus() error {
	o := &p.o
	docs, cinfo, err := readCorpus(o.Corpus)
	if err != nil {
		return fmt.Errorf("pretrain: %w", err)
	}
	if err := o.Resolve(p.cfg, len(docs)); err != nil {
		return o.inputError(p.optsPath, err)
	}
	p.cfg.HiddenDropoutProb, p.cfg.AttentionProbsDropoutProb = o.Dropout, o.Dropout
	o.ModelConfig = &p.cfg
	pc, err := prepareDocs(p.tok, o.Corpus, docs, cinfo, o.Seq, o.Holdout, !o.NoPack, o.Seed)
	if err != nil {
		return fmt.Errorf("pretrain: %w", err)
	}
	p.corpus, p.seqs, p.held, p.heldDocs = cinfo, pc.Train, pc.HeldOut, pc.HeldOutDocs
	if len(p.held) > o.MaxEvalSeqs {
		p.held = p.held[:o.MaxEvalSeqs]
	}
	if len(p.seqs) < o.BatchSize {
		return fmt.Errorf("pretrain: corpus %s gives %d training sequences, fewer than a batch of %d", o.Corpus, len(p.seqs), o.BatchSize)
	}
	for _, s := range p.seqs {
		p.trainTokens += len(s.IDs)
	}
	return nil
}

// newModel builds the model from the config with the initialisation stream
// (then copies o.InitFrom's weights into a new run's) and the masking and
// dropout sources.
func (p *pretrainer) newModel() error {
	o := &p.o
	initRng := rngstream.PretrainInit.Rand(o.Seed, 0)
	enc, err := encoder.New(p.cfg, initRng)
	if err != nil {
		return fmt.Errorf("pretrain: %w", err)
	}
	p.model = NewModel(enc, initRng)
	p.params = p.model.Params()
	if o.InitFrom != "" && !o.Resume {
		n, head, err := initFrom(p.params, o.InitFrom)
		if err != nil {
			return fmt.Errorf("pretrain: initial checkpoint: %w", err)
		}
		slog.Info("pretrain: initialised from a checkpoint", "dir", o.InitFrom, "tensors", n, "mlm_head_loaded", head)
	}
	p.maskSrc, p.dropSrc = rngstream.PretrainMask.PCG(o.Seed, 0), rngstream.PretrainDropout.PCG(o.Seed, 0)
	p.maskRng, p.dropRng = rand.New(p.maskSrc), rand.New(p.dropSrc)
	return nil
}

// open opens the run's training loop (a resume restores the model, the
// optimizer, the random sources and the interval sums from the checkpoint),
// with report for its progress events.
func (p *pretrainer) open(report progress.Func) (*loop.Run, error) {
	o := &p.o
	p.since = time.Now()
	perEpoch := len(p.seqs) / o.BatchSize
	run, err := loop.Open(loop.Config{Stage: "pretrain", Checkpoint: p.statePath, StateKey: stateKey,
		Metrics: filepath.Join(o.Out, metricsFile), LineUnit: "metrics line",
		Params: p.params, LR: o.LR, WeightDecay: o.WeightDecay, Eps: nn.BERTAdamEps,
		Warmup: int(math.Round(o.WarmupRatio * float64(o.Steps))), Steps: o.Steps, GradClip: o.GradClip,
		Examples: len(p.seqs), BatchSize: o.BatchSize, Order: func(e int) *rand.Rand { return rngstream.PretrainOrder.Rand(o.Seed, e) },
		Sources:         []loop.Source{{Key: maskKey, RNG: p.maskSrc}, {Key: dropoutKey, RNG: p.dropSrc}},
		CheckpointEvery: o.SaveEvery, StopAfter: o.StopAfterSteps, Resume: o.Resume, Progress: report,
		Step: p.step, AfterStep: p.afterStep, State: &p.sums, Legacy: legacyState(o.BatchSize, perEpoch),
		Saved: func() error { return Save(o.Out, p.model, p.tokFiles...) }})
	if err != nil {
		if o.Resume {
			return nil, fmt.Errorf("pretrain: resume: %w", err)
		}
		return nil, fmt.Errorf("pretrain: %w", err)
	}
	p.run = run
	return run, nil
}

// logStart logs the run's start: its model and data.
func (p *pretrainer) logStart() {
	o := &p.o
	slog.Info("pretrain: start", "backend", nn.Backend(), "config", o.Config, "params", p.cfg.NumParams(),
		"documents", p.corpus.Documents, "duplicates", p.corpus.Duplicates, "train_seqs", len(p.seqs), "train_tokens", p.trainTokens,
		"heldout_docs", p.heldDocs, "heldout_seqs", len(p.held), "steps", o.Steps, "batch", o.BatchSize, "seq", o.Seq)
}

// evaluate scores the held-out batches: the "heldout" metrics line of step.
func (p *pretrainer) evaluate(step int) Metric {
	var tot Stats
	var lsum float64
	for _, b := range p.evalBatches {
		s := p.model.Evaluate(b)
		lsum += s.Loss * float64(s.Masked)
		tot.Masked += s.Masked
		tot.Correct += s.Correct
	}
	m := Metric{Step: step, Split: "heldout", MaskedTokens: tot.Masked, MaskedAcc: tot.Accuracy(), ElapsedS: p.run.Seconds()}
	if tot.Masked > 0 {
		m.Loss = lsum / float64(tot.Masked)
	}
	return m
}

// step is the loop's Step: it masks the batch idx, computes its loss and
// gradients (with dropout) and adds it to the interval's sums.
func (p *pretrainer) step(_ *loop.State, idx []int, lr float64) (float64, string, error) {
	b := makeBatch(p.seqs, idx, p.masker, p.maskRng, p.tok.PadID())
	s := p.model.LossAndGrad(b, p.dropRng)
	if math.IsNaN(s.Loss) || math.IsInf(s.Loss, 0) {
		return 0, "", fmt.Errorf("loss is %g (a lower learning rate?)", s.Loss)
	}
	p.sums.Masked += s.Masked
	p.sums.Correct += s.Correct
	p.sums.LossSum += s.Loss * float64(s.Masked)
	p.sessionSteps, p.lastLR = p.sessionSteps+1, lr
	return s.Loss, fmt.Sprintf("acc %.3f", s.Accuracy()), nil
}

// afterStep is the loop's AfterStep: a "train" line for the steps since the
// last one and a held-out evaluation every EvalEvery steps and at the
// session's end.
func (p *pretrainer) afterStep(st *loop.State, final bool) error {
	if !final && (p.o.EvalEvery == 0 || st.Step%p.o.EvalEvery != 0) {
		return nil
	}
	tot := Stats{Masked: p.sums.Masked, Correct: p.sums.Correct}
	tm := Metric{Step: st.Step, Split: "train", MaskedTokens: tot.Masked, MaskedAcc: tot.Accuracy(),
		LR: p.lastLR, ElapsedS: p.run.Seconds(), StepsPerS: float64(p.sessionSteps) / time.Since(p.since).Seconds()}
	if tot.Masked > 0 {
		tm.Loss = p.sums.LossSum / float64(tot.Masked)
	}
	hm := p.evaluate(st.Step)
	if err := p.run.Log(tm); err != nil {
		return err
	}
	if err := p.run.Log(hm); err != nil {
		return err
	}
	p.finalHeldOut = hm
	slog.Info("pretrain", "step", st.Step, "loss", tm.Loss, "masked_acc", tm.MaskedAcc, "heldout_loss", hm.Loss,
		"heldout_acc", hm.MaskedAcc, "steps_per_s", tm.StepsPerS)
	p.sums, p.sessionSteps, p.since = interval{}, 0, time.Now()
	return nil
}

// finish writes the run's summary (pretrain_summary.json) after training
// and returns it; a run resumed at its end is evaluated once here.
func (p *pretrainer) finish() (*Result, error) {
	o, st := &p.o, p.run.State()
	if p.finalHeldOut.Split == "" { // resumed at the end: evaluate once
		p.finalHeldOut = p.evaluate(st.Step)
	}
	res := &Result{Out: o.Out, Backend: nn.Backend(), Config: o.Config, NumParams: p.cfg.NumParams(), Corpus: p.corpus,
		TrainSequences: len(p.seqs), TrainTokens: p.trainTokens, HeldOutDocs: p.heldDocs, HeldOutSeqs: len(p.held),
		Steps: st.Step, Epochs: float64(st.Epoch) + float64(st.Batch*o.BatchSize)/float64(len(p.seqs)),
		InitialHeldOut: p.initialHeldOut, FinalHeldOut: p.finalHeldOut, ElapsedS: p.run.Seconds(),
		StoppedEarly: !st.Done, MaskedTokensPct: 100 * o.MaskProb}
	if err := atomicfile.WriteJSON(filepath.Join(o.Out, summaryFile), res); err != nil {
		return nil, fmt.Errorf("pretrain: %w", err)
	}
	slog.Info("pretrain: done", "out", o.Out, "steps", st.Step, "heldout_loss", res.FinalHeldOut.Loss,
		"heldout_masked_acc", res.FinalHeldOut.MaskedAcc, "elapsed_s", res.ElapsedS)
	return res, nil
}

// checkResumed returns the options of a resumed run, checked before any
// work: the options saved in optsPath (validated again, upgraded from
// version 0) with o.Change applied, in a directory with a checkpoint, with
// o's Out and StopAfterSteps. The files they name must exist. An error
// about a changed option is a bare *option.Error (for a program to map to
// its own names); errors about the saved file name it.
func checkResumed(o Options, statePath, optsPath string) (Options, error) {
	if o.Out == "" {
		return o, option.Errorf("out", nil, "required: the output directory")
	}
	if err := loop.Check(statePath, true); err != nil {
		return o, fmt.Errorf("pretrain: %w", err)
	}
	saved, err := readOptions(optsPath)
	if err != nil {
		return o, fmt.Errorf("pretrain: resume: %w", err)
	}
	if c := o.Change.Steps; c != nil && *c != saved.Steps {
		slog.Warn("pretrain: the number of steps changed on resume; the learning-rate schedule changes from here", "was", saved.Steps, "now", *c)
	}
	o.Change.apply(&saved)
	if err := saved.Validate(); err != nil {
		return o, err // the saved options were valid: a changed one is not
	}
	saved.Out, saved.Resume, saved.StopAfterSteps = o.Out, true, o.StopAfterSteps // the directory may have moved since
	if err := saved.CheckFiles(); err != nil {
		return o, fmt.Errorf("pretrain: resume: %s: %w", optsPath, err)
	}
	return saved, nil
}

// inputError is an error of checking the options against the inputs (the
// model config, the corpus): a new run's *option.Error as it is, about the
// options given; a resumed run's wrapped with its saved options file optsPath.
func (o *Options) inputError(optsPath string, err error) error {
	_, isOption := err.(*option.Error)
	switch {
	case isOption && o.Resume:
		return fmt.Errorf("pretrain: resume: %s: %w", optsPath, err)
	case isOption:
		return err
	}
	return fmt.Errorf("pretrain: %w", err)
}

// modelConfig returns the BERT configuration of the run: ModelConfig, else
// InitFrom's config.json (Config becomes "hf:DIR"), else Config (a
// config.json or a preset), with the tokenizer's vocabulary size and [PAD]
// id, checked against Seq. The dropout is left for Resolve.
func (o *Options) modelConfig(tok tokenize.Tokenizer) (encoder.Config, error) {
	var cfg encoder.Config
	var err error
	switch {
	case o.ModelConfig != nil:
		cfg = *o.ModelConfig
	case o.InitFrom != "":
		if cfg, err = encoder.ReadConfig(filepath.Join(o.InitFrom, encoder.ConfigFile)); err != nil {
			return cfg, fmt.Errorf("initial checkpoint: %w", err)
		}
		o.Config = "hf:" + o.InitFrom
	case fsutil.IsFile(o.Config):
		if cfg, err = encoder.ReadConfig(o.Config); err != nil {
			return cfg, err
		}
	default:
		if cfg, err = encoder.Preset(o.Config); err != nil {
			return cfg, fmt.Errorf("config %q: %w", o.Config, err)
		}
	}
	if cfg.ModelType != "bert" {
		return cfg, fmt.Errorf("model type %q; only bert is supported", cfg.ModelType)
	}
	if cfg.VocabSize != tok.VocabSize() && o.InitFrom != "" {
		return cfg, fmt.Errorf("initial checkpoint %s has vocab_size %d but the tokenizer %s has %d tokens: use the checkpoint's own vocabulary",
			o.InitFrom, cfg.VocabSize, o.Vocab, tok.VocabSize())
	}
	if cfg.VocabSize != tok.VocabSize() {
		slog.Info("pretrain: vocab_size set to the tokenizer's", "config", cfg.VocabSize, "tokenizer", tok.VocabSize())
		cfg.VocabSize = tok.VocabSize()
	}
	cfg.PadTokenID = tok.PadID()
	if o.Seq > cfg.MaxSeqLen() {
		return cfg, option.Errorf("seq", o.Seq, "exceeds the model's %d positions", cfg.MaxSeqLen())
	}
	if err := cfg.Validate(); err != nil {
		return cfg, fmt.Errorf("config: %w", err)
	}
	return cfg, nil
}

// PreparedCorpus is what a pretraining run trains and evaluates on: the
// corpus read by readCorpus, split by splitHeldOut and packed by
// buildSequences, before [Run] caps the held-out sequences at
// Options.MaxEvalSeqs.
type PreparedCorpus struct {
	Info           CorpusInfo
	Train, HeldOut []Sequence
	HeldOutDocs    int
}

// PrepareCorpus reads the corpus spec, holds out holdout documents, and packs
// both parts into sequences of at most seq tokens. An [option.AutoInt]
// holdout means [DefaultHoldout] of the corpus's documents.
//
// It uses the random streams that Run uses for a given seed: the split's,
// rngstream.PretrainHeldOut, then rngstream.PretrainPack for the training
// sequences and rngstream.PretrainHeldOutPack for the held-out ones. So
// `nvdp pretrain --seed S` and a caller of PrepareCorpus(..., S) see the same
// sequences. Its errors name the corpus.
func PrepareCorpus(tok tokenize.Tokenizer, spec string, seq, holdout int, pack bool, seed uint64) (*PreparedCorpus, error) {
	docs, info, err := readCorpus(spec)
	if err != nil {
		return nil, err
	}
	if holdout == option.AutoInt {
		holdout = DefaultHoldout(len(docs))
	}
	return prepareDocs(tok, spec, docs, info, seq, holdout, pack, seed)
}

// prepareDocs is PrepareCorpus after readCorpus, with holdout explicit.
func prepareDocs(tok tokenize.Tokenizer, spec string, docs []document, info CorpusInfo, seq, holdout int, pack bool, seed uint64) (*PreparedCorpus, error) {
	trainDocs, heldDocs, err := splitHeldOut(docs, holdout, seed)
	if err != nil {
		return nil, fmt.Errorf("corpus %s: %w", spec, err)
	}
	train, err := buildSequences(tok, trainDocs, seq, pack, rngstream.PretrainPack.Rand(seed, 0))
	if err != nil {
		return nil, fmt.Errorf("corpus %s: %w", spec, err)
	}
	held, err := buildSequences(tok, heldDocs, seq, pack, rngstream.PretrainHeldOutPack.Rand(seed, 0))
	if err != nil {
		return nil, fmt.Errorf("corpus %s (held-out): %w", spec, err)
	}
	return &PreparedCorpus{Info: info, Train: train, HeldOut: held, HeldOutDocs: len(heldDocs)}, nil
}

// makeBatch stacks, masks and right-pads the sequences idx (dynamic padding
// to the longest). Masking draws from rng in sequence order.
func makeBatch(seqs []Sequence, idx []int, m *masker, rng *rand.Rand, padID int) *Batch {
	S := 0
	for _, i := range idx {
		S = max(S, len(seqs[i].IDs))
	}
	B := len(idx)
	b := &Batch{In: encoder.Input{IDs: make([]int32, B*S), TypeIDs: make([]int32, B*S), Mask: make([]float32, B*S), B: B, S: S}}
	for r, i := range idx {
		s := seqs[i]
		row := b.In.IDs[r*S : r*S+S]
		for j := range row {
			row[j] = int32(padID)
		}
		copy(row, s.IDs)
		copy(b.In.TypeIDs[r*S:], s.TypeIDs)
		for j := range s.IDs {
			b.In.Mask[r*S+j] = 1
		}
		var words []int
		if m.WholeWord {
			words = s.WordIDs
		}
		p, l := m.Mask(row[:len(s.IDs)], words, rng)
		for k := range p {
			b.Positions = append(b.Positions, r*S+p[k])
			b.Labels = append(b.Labels, l[k])
		}
	}
	return b
}

// initFrom copies the weights of the Hugging Face directory dir into params
// (matched by name; shapes must agree). The MLM head comes from the
// checkpoint when it has one (BertForMaskedLM); from a BertModel checkpoint
// only the encoder is copied and the head keeps its fresh initialisation.
// It returns the number of tensors copied and whether the head was among them.
func initFrom(params []*nn.Param, dir string) (int, bool, error) {
	enc, err := encoder.LoadDir(dir)
	if err != nil {
		return 0, false, err
	}
	srcParams := enc.Params()
	h, err := loadHead(enc, dir)
	switch {
	case err == nil:
		srcParams = append(srcParams, h.Params()...)
	case !errors.Is(err, ErrNoMLMHead):
		return 0, false, err
	}
	head := err == nil
	byName := make(map[string]*nn.Param, len(srcParams))
	for _, p := range srcParams {
		byName[p.Name] = p
	}
	n := 0
	for _, p := range params {
		q, ok := byName[p.Name]
		if !ok {
			continue // the head of a BertModel checkpoint
		}
		if !slices.Equal(q.Value.Shape, p.Value.Shape) {
			return 0, false, fmt.Errorf("%s: tensor %s has shape %v, the model needs %v", dir, p.Name, q.Value.Shape, p.Value.Shape)
		}
		copy(p.Value.Data, q.Value.Data)
		n++
	}
	return n, head, nil
}

// heldOutBatches masks the held-out sequences once, in batches of
// batchSize in order, with rng: every evaluation of a run scores the same
// masked tokens.
func heldOutBatches(held []Sequence, batchSize int, masker *masker, rng *rand.Rand, padID int) []*Batch {
	var batches []*Batch
	for lo := 0; lo < len(held); lo += batchSize {
		idx := make([]int, 0, batchSize)
		for i := lo; i < min(lo+batchSize, len(held)); i++ {
			idx = append(idx, i)
		}
		batches = append(batches, makeBatch(held, idx, masker, rng, padID))
	}
	return batches
}

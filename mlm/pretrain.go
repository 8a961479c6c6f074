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

// Files a pretraining run writes into its output directory (besides the
// Hugging Face files config.json, model.safetensors and the tokenizer files).
const (
	StateFile   = "pretrain_state.safetensors" // checkpoint: parameters, AdamW moments, data position, RNG states
	OptionsFile = "pretrain_options.json"      // the run's options (used by a resume)
	MetricsFile = "pretrain_metrics.jsonl"     // one JSON object per line: train interval and held-out evaluations
	SummaryFile = "pretrain_summary.json"      // final Result
)

// Metric is one line of pretrain_metrics.jsonl. Split "train" summarises the
// steps since the previous line (loss = mean over their masked tokens);
// "heldout" is an evaluation of the held-out slice with fixed masks.
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

// Result is the summary of a run (pretrain_summary.json and the CLI's JSON).
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

// Errors of Run for an output directory that holds a run (without
// Options.Resume) or holds none to resume.
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

// Run pretrains a BERT encoder with the MLM objective (see the package
// documentation and docs/pretraining.md) and writes the Hugging Face
// directory, checkpoint, metrics and the resolved options into o.Out.
//
// Every input is checked before any work and before o.Out is created: the
// options (Validate; a resumed run's saved options again, with o.Change),
// the files (CheckFiles), the tokenizer, the model config, the corpus and
// the Auto options resolved from them (Resolve). An invalid option of a new
// run, or a changed one of a resumed run, is a bare *option.Error; one read
// from the saved options file is wrapped with the file's path.
//
// The training loop is internal/loop's: report receives a progress event
// per step (stage "pretrain", unit "steps", the step's loss; nil: none);
// StopAfterSteps stops with a checkpoint (Result.StoppedEarly); cancelling
// ctx stops before the next step with a checkpoint and returns a
// *loop.Interrupted error that unwraps to ctx.Err(). A directory that holds
// a run without o.Resume is ErrRunExists, o.Resume without one
// ErrNoCheckpoint.
//
// Resuming is bitwise: the data order of epoch e is a permutation drawn from
// rngstream.PretrainOrder, and the masking and dropout PCG states, AdamW
// moments and step are restored from the checkpoint (also from one written
// before the loop was shared).
func Run(ctx context.Context, o Options, report progress.Func) (*Result, error) {
	statePath := filepath.Join(o.Out, StateFile)
	optsPath := filepath.Join(o.Out, OptionsFile)
	o, err := checkOptions(o, statePath, optsPath)
	if err != nil {
		return nil, err
	}
	tok, err := tokenize.Load(o.Vocab)
	if err != nil {
		return nil, fmt.Errorf("pretrain: %w", err)
	}
	if tok.Kind() != "wordpiece" {
		return nil, fmt.Errorf("pretrain: tokenizer %s is %s; only BERT WordPiece vocabularies are supported", o.Vocab, tok.Kind())
	}
	tokFiles := []string{o.Vocab}
	if st, err := os.Stat(o.Vocab); err == nil && st.IsDir() {
		tokFiles = encoder.TokenizerFiles(o.Vocab)
	}
	cfg, err := o.modelConfig(tok)
	if err != nil {
		return nil, o.inputError(optsPath, err)
	}

	// Corpus: read, resolve the Auto options, split and pack.
	docs, cinfo, err := ReadCorpus(o.Corpus)
	if err != nil {
		return nil, fmt.Errorf("pretrain: %w", err)
	}
	if err := o.Resolve(cfg, len(docs)); err != nil {
		return nil, o.inputError(optsPath, err)
	}
	cfg.HiddenDropoutProb, cfg.AttentionProbsDropoutProb = o.Dropout, o.Dropout
	o.ModelConfig = &cfg
	pc, err := prepareDocs(tok, o.Corpus, docs, cinfo, o.Seq, o.Holdout, !o.NoPack, o.Seed)
	if err != nil {
		return nil, fmt.Errorf("pretrain: %w", err)
	}
	seqs, heldSeqs, heldDocs := pc.Train, pc.HeldOut, pc.HeldOutDocs
	if len(heldSeqs) > o.MaxEvalSeqs {
		heldSeqs = heldSeqs[:o.MaxEvalSeqs]
	}
	if len(seqs) < o.BatchSize {
		return nil, fmt.Errorf("pretrain: corpus %s gives %d training sequences, fewer than a batch of %d", o.Corpus, len(seqs), o.BatchSize)
	}
	trainTokens := 0
	for _, s := range seqs {
		trainTokens += len(s.IDs)
	}
	masker, err := NewMasker(tok.MaskID(), cfg.VocabSize, []int{tok.PadID(), tok.CLSID(), tok.SEPID(), tok.UnkID()}, o.WholeWord)
	if err != nil {
		return nil, fmt.Errorf("pretrain: vocabulary %s: %w", o.Vocab, err)
	}
	masker.Prob = o.MaskProb
	evalBatches := heldOutBatches(heldSeqs, o.BatchSize, masker, rngstream.PretrainEvalMask.Rand(o.Seed, 0), tok.PadID())

	// Every input is read and checked: the run's files from here.
	if err := os.MkdirAll(o.Out, 0o755); err != nil {
		return nil, fmt.Errorf("pretrain: %w", err)
	}

	// Model.
	initRng := rngstream.PretrainInit.Rand(o.Seed, 0)
	enc, err := encoder.New(cfg, initRng)
	if err != nil {
		return nil, fmt.Errorf("pretrain: %w", err)
	}
	model := NewModel(enc, initRng)
	params := model.Params()
	if o.InitFrom != "" && !o.Resume {
		n, head, err := initFrom(params, o.InitFrom)
		if err != nil {
			return nil, fmt.Errorf("pretrain: initial checkpoint: %w", err)
		}
		slog.Info("pretrain: initialised from a checkpoint", "dir", o.InitFrom, "tensors", n, "mlm_head_loaded", head)
	}
	maskSrc, dropSrc := rngstream.PretrainMask.PCG(o.Seed, 0), rngstream.PretrainDropout.PCG(o.Seed, 0)
	maskRng, dropRng := rand.New(maskSrc), rand.New(dropSrc)

	res := &Result{Out: o.Out, Backend: nn.Backend(), Config: o.Config, NumParams: cfg.NumParams(), Corpus: cinfo,
		TrainSequences: len(seqs), TrainTokens: trainTokens, HeldOutDocs: heldDocs, HeldOutSeqs: len(heldSeqs)}
	var run *loop.Run
	evaluate := func(step int) Metric {
		var tot Stats
		var lsum float64
		for _, b := range evalBatches {
			s := model.Evaluate(b)
			lsum += s.Loss * float64(s.Masked)
			tot.Masked += s.Masked
			tot.Correct += s.Correct
		}
		m := Metric{Step: step, Split: "heldout", MaskedTokens: tot.Masked, MaskedAcc: tot.Accuracy(), ElapsedS: run.Seconds()}
		if tot.Masked > 0 {
			m.Loss = lsum / float64(tot.Masked)
		}
		return m
	}
	// The training steps since the last "train" line: their sums (resumable)
	// and, for the speed, this session's count and start.
	sums := &interval{}
	sessionSteps, since, lastLR := 0, time.Now(), 0.0
	step := func(_ *loop.State, idx []int, lr float64) (float64, string, error) {
		b := makeBatch(seqs, idx, masker, maskRng, tok.PadID())
		s := model.LossAndGrad(b, dropRng)
		if math.IsNaN(s.Loss) || math.IsInf(s.Loss, 0) {
			return 0, "", fmt.Errorf("loss is %g (a lower learning rate?)", s.Loss)
		}
		sums.Masked += s.Masked
		sums.Correct += s.Correct
		sums.LossSum += s.Loss * float64(s.Masked)
		sessionSteps, lastLR = sessionSteps+1, lr
		return s.Loss, fmt.Sprintf("acc %.3f", s.Accuracy()), nil
	}
	// afterStep: a "train" line for the steps since the last one and a
	// held-out evaluation every EvalEvery steps and at the session's end.
	afterStep := func(st *loop.State, final bool) error {
		if !final && (o.EvalEvery == 0 || st.Step%o.EvalEvery != 0) {
			return nil
		}
		tot := Stats{Masked: sums.Masked, Correct: sums.Correct}
		tm := Metric{Step: st.Step, Split: "train", MaskedTokens: tot.Masked, MaskedAcc: tot.Accuracy(),
			LR: lastLR, ElapsedS: run.Seconds(), StepsPerS: float64(sessionSteps) / time.Since(since).Seconds()}
		if tot.Masked > 0 {
			tm.Loss = sums.LossSum / float64(tot.Masked)
		}
		hm := evaluate(st.Step)
		if err := run.Log(tm); err != nil {
			return err
		}
		if err := run.Log(hm); err != nil {
			return err
		}
		res.FinalHeldOut = hm
		slog.Info("pretrain", "step", st.Step, "loss", tm.Loss, "masked_acc", tm.MaskedAcc, "heldout_loss", hm.Loss,
			"heldout_acc", hm.MaskedAcc, "steps_per_s", tm.StepsPerS)
		*sums, sessionSteps, since = interval{}, 0, time.Now()
		return nil
	}
	perEpoch := len(seqs) / o.BatchSize
	run, err = loop.Open(loop.Config{Stage: "pretrain", Checkpoint: statePath, StateKey: stateKey,
		Metrics: filepath.Join(o.Out, MetricsFile), LineUnit: "metrics line",
		Params: params, LR: o.LR, WeightDecay: o.WeightDecay, Eps: nn.BERTAdamEps,
		Warmup: int(math.Round(o.WarmupRatio * float64(o.Steps))), Steps: o.Steps, GradClip: o.GradClip,
		Examples: len(seqs), BatchSize: o.BatchSize, Order: func(e int) *rand.Rand { return rngstream.PretrainOrder.Rand(o.Seed, e) },
		Sources:         []loop.Source{{Key: maskKey, RNG: maskSrc}, {Key: dropoutKey, RNG: dropSrc}},
		CheckpointEvery: o.SaveEvery, StopAfter: o.StopAfterSteps, Resume: o.Resume, Progress: report,
		Step: step, AfterStep: afterStep, State: sums, Legacy: legacyState(o.BatchSize, perEpoch),
		Saved: func() error { return Save(o.Out, model, tokFiles...) }})
	if err != nil {
		if o.Resume {
			return nil, fmt.Errorf("pretrain: resume: %w", err)
		}
		return nil, fmt.Errorf("pretrain: %w", err)
	}
	st := run.State()
	if o.Resume {
		slog.Info("pretrain: resumed", "dir", o.Out, "step", st.Step, "epoch", st.Epoch+1)
	}
	o.Version = OptionsVersion
	if err := atomicfile.WriteJSON(optsPath, o); err != nil { // resolved; on resume: a changed Steps/SaveEvery/EvalEvery
		return nil, fmt.Errorf("pretrain: %w", err)
	}
	slog.Info("pretrain: start", "backend", nn.Backend(), "config", o.Config, "params", cfg.NumParams(),
		"documents", cinfo.Documents, "duplicates", cinfo.Duplicates, "train_seqs", len(seqs), "train_tokens", trainTokens,
		"heldout_docs", heldDocs, "heldout_seqs", len(heldSeqs), "steps", o.Steps, "batch", o.BatchSize, "seq", o.Seq)
	if !o.Resume {
		m := evaluate(0)
		res.InitialHeldOut = &m
		if err := run.Log(m); err != nil {
			return nil, err
		}
	}
	if err := run.Train(ctx); err != nil {
		return nil, fmt.Errorf("pretrain: %w", err)
	}
	if res.FinalHeldOut.Split == "" { // resumed at the end: evaluate once
		res.FinalHeldOut = evaluate(st.Step)
	}
	res.Steps = st.Step
	res.Epochs = float64(st.Epoch) + float64(st.Batch*o.BatchSize)/float64(len(seqs))
	res.ElapsedS = run.Seconds()
	res.StoppedEarly = !st.Done
	res.MaskedTokensPct = 100 * o.MaskProb
	if err := atomicfile.WriteJSON(filepath.Join(o.Out, SummaryFile), res); err != nil {
		return nil, fmt.Errorf("pretrain: %w", err)
	}
	slog.Info("pretrain: done", "out", o.Out, "steps", st.Step, "heldout_loss", res.FinalHeldOut.Loss,
		"heldout_masked_acc", res.FinalHeldOut.MaskedAcc, "elapsed_s", res.ElapsedS)
	return res, nil
}

// checkOptions returns the options of the run Run is given, checked before
// any work: for a new run o itself, validated, in a directory that holds no
// run; for a resumed one the options saved in optsPath (validated again,
// upgraded from version 0) with o.Change applied, in a directory with a
// checkpoint. The files they name must exist. Errors about the options
// given are a bare *option.Error (for a program to map to its own names);
// errors about the saved file name it.
func checkOptions(o Options, statePath, optsPath string) (Options, error) {
	if !o.Resume && o.Change != (Change{}) {
		return o, errors.New("pretrain: Options.Change changes a resumed run's options; give the options themselves to a new run")
	}
	if o.Out == "" {
		return o, option.Errorf("out", nil, "required: the output directory")
	}
	if err := loop.Check(statePath, o.Resume); err != nil {
		return o, fmt.Errorf("pretrain: %w", err)
	}
	if !o.Resume {
		if err := o.Validate(); err != nil {
			return o, err
		}
		if o.Vocab == "" {
			o.Vocab = o.InitFrom // the initial checkpoint's own tokenizer files
		}
		return o, o.CheckFiles()
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
// corpus read by ReadCorpus, split by SplitHeldOut and packed by
// BuildSequences (before Run caps the held-out sequences at MaxEvalSeqs).
type PreparedCorpus struct {
	Info           CorpusInfo
	Train, HeldOut []Sequence
	HeldOutDocs    int
}

// PrepareCorpus reads the corpus spec, holds out holdout documents
// (option.AutoInt: DefaultHoldout of the corpus's documents) and packs both
// parts into sequences of at most seq tokens, with the random streams Run
// uses for a given seed: the split's (rngstream.PretrainHeldOut), then
// rngstream.PretrainPack for the training sequences and
// rngstream.PretrainHeldOutPack for the held-out ones. So `nvdp pretrain
// --seed S` and a caller of PrepareCorpus(..., S) see the same sequences.
// Errors name the corpus.
func PrepareCorpus(tok tokenize.Tokenizer, spec string, seq, holdout int, pack bool, seed uint64) (*PreparedCorpus, error) {
	docs, info, err := ReadCorpus(spec)
	if err != nil {
		return nil, err
	}
	if holdout == option.AutoInt {
		holdout = DefaultHoldout(len(docs))
	}
	return prepareDocs(tok, spec, docs, info, seq, holdout, pack, seed)
}

// prepareDocs is PrepareCorpus after ReadCorpus, with holdout explicit.
func prepareDocs(tok tokenize.Tokenizer, spec string, docs []Document, info CorpusInfo, seq, holdout int, pack bool, seed uint64) (*PreparedCorpus, error) {
	trainDocs, heldDocs, err := SplitHeldOut(docs, holdout, seed)
	if err != nil {
		return nil, fmt.Errorf("corpus %s: %w", spec, err)
	}
	train, err := BuildSequences(tok, trainDocs, seq, pack, rngstream.PretrainPack.Rand(seed, 0))
	if err != nil {
		return nil, fmt.Errorf("corpus %s: %w", spec, err)
	}
	held, err := BuildSequences(tok, heldDocs, seq, pack, rngstream.PretrainHeldOutPack.Rand(seed, 0))
	if err != nil {
		return nil, fmt.Errorf("corpus %s (held-out): %w", spec, err)
	}
	return &PreparedCorpus{Info: info, Train: train, HeldOut: held, HeldOutDocs: len(heldDocs)}, nil
}

// makeBatch stacks, masks and right-pads the sequences idx (dynamic padding
// to the longest). Masking draws from rng in sequence order.
func makeBatch(seqs []Sequence, idx []int, m *Masker, rng *rand.Rand, padID int) *Batch {
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
func heldOutBatches(held []Sequence, batchSize int, masker *Masker, rng *rand.Rand, padID int) []*Batch {
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

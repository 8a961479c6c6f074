package mlm

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"math"
	"math/rand/v2"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"time"

	"github.com/nvdp-project/nvdp/encoder"
	"github.com/nvdp-project/nvdp/internal/atomicfile"
	"github.com/nvdp-project/nvdp/internal/fsutil"
	"github.com/nvdp-project/nvdp/nn"
	"github.com/nvdp-project/nvdp/tokenize"
	"github.com/schollz/progressbar/v3"
)

// Files a pretraining run writes into its output directory (besides the
// Hugging Face files config.json, model.safetensors and the tokenizer files).
const (
	StateFile   = "pretrain_state.safetensors" // checkpoint: parameters, AdamW moments, data position, RNG states
	OptionsFile = "pretrain_options.json"      // the run's options (used by --resume)
	MetricsFile = "pretrain_metrics.jsonl"     // one JSON object per line: train interval and held-out evaluations
	SummaryFile = "pretrain_summary.json"      // final Result
)

// Options configure Run. Zero values take the defaults noted.
type Options struct {
	// Corpus is a text file, a directory of .txt files, or a GLUE directory
	// (glue:DIR, or auto-detected); see ReadCorpus.
	Corpus string `json:"corpus"`
	// Config is a preset (bert-tiny, bert-mini, ...) or a config.json path;
	// ModelConfig, when set, is used instead (tests, resume).
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
	Vocab string `json:"vocab"`
	Out   string `json:"out"`
	// Seq is the maximum sequence length in tokens, specials included (128).
	Seq int `json:"seq"`
	// BatchSize is the number of sequences per step (64).
	BatchSize int `json:"batch_size"`
	// Steps is the number of optimizer steps (required).
	Steps int `json:"steps"`
	// LR is the peak learning rate (5e-4), reached after WarmupRatio*Steps
	// steps of linear warm-up and decayed linearly to 0 at Steps (HF
	// get_linear_schedule_with_warmup).
	LR          float64 `json:"lr"`
	WarmupRatio float64 `json:"warmup_ratio"`
	// WeightDecay is AdamW's decoupled decay (BERT: 0.01), not applied to biases
	// and LayerNorm parameters. AdamW betas (0.9, 0.999), eps 1e-6 as BERT.
	WeightDecay float64 `json:"weight_decay"`
	// GradClip is the global L2 gradient-norm bound (1; < 0 disables).
	GradClip float64 `json:"grad_clip"`
	// MaskProb is the fraction of tokens predicted (0.15).
	MaskProb  float64 `json:"mask_prob"`
	WholeWord bool    `json:"whole_word"`
	// NoPack makes every line its own sequence instead of packing
	// consecutive lines up to Seq tokens.
	NoPack bool `json:"no_pack"`
	// Holdout is the number of held-out documents (0: 1%).
	Holdout int `json:"holdout"`
	// MaxEvalSeqs caps the held-out sequences evaluated (0: 1024).
	MaxEvalSeqs int `json:"max_eval_seqs"`
	// Dropout, when set, overrides the config's hidden and attention dropout
	// (nil: the config's, 0.1 for the presets).
	Dropout *float64 `json:"dropout,omitempty"`
	Seed    uint64   `json:"seed"`
	// SaveEvery writes a checkpoint every K steps (0: 500); EvalEvery evaluates
	// the held-out slice every K steps (0: Steps/20, at least 1).
	SaveEvery int `json:"save_every"`
	EvalEvery int `json:"eval_every"`

	// Resume continues the run in Out from its checkpoint with the saved
	// options (Steps, SaveEvery, EvalEvery may be changed; a changed Steps
	// changes the learning-rate schedule from there on).
	Resume bool `json:"-"`
	// Progress shows a progress bar on stderr.
	Progress bool `json:"-"`
	// StopAfter stops (with a checkpoint) after this many steps in total (0: off).
	StopAfter int `json:"-"`
}

func (o *Options) defaults() {
	if o.Seq == 0 {
		o.Seq = 128
	}
	if o.BatchSize == 0 {
		o.BatchSize = 64
	}
	if o.LR == 0 {
		o.LR = 5e-4
	}
	if o.GradClip == 0 {
		o.GradClip = 1
	}
	if o.MaskProb == 0 {
		o.MaskProb = 0.15
	}
	if o.MaxEvalSeqs == 0 {
		o.MaxEvalSeqs = 1024
	}
	if o.SaveEvery == 0 {
		o.SaveEvery = 500
	}
	if o.EvalEvery == 0 {
		o.EvalEvery = max(1, o.Steps/20)
	}
}

func (o *Options) validate() error {
	switch {
	case o.Corpus == "":
		return errors.New("pretrain: no corpus")
	case o.Vocab == "":
		return errors.New("pretrain: no vocabulary (--vocab)")
	case o.Out == "":
		return errors.New("pretrain: no output directory (--out)")
	case o.Steps <= 0:
		return fmt.Errorf("pretrain: steps %d must be positive", o.Steps)
	case o.BatchSize <= 0:
		return fmt.Errorf("pretrain: batch size %d must be positive", o.BatchSize)
	case o.LR <= 0 || math.IsNaN(o.LR):
		return fmt.Errorf("pretrain: learning rate %g must be positive", o.LR)
	case o.WarmupRatio < 0 || o.WarmupRatio >= 1:
		return fmt.Errorf("pretrain: warm-up ratio %g outside [0, 1)", o.WarmupRatio)
	case o.MaskProb <= 0 || o.MaskProb >= 1:
		return fmt.Errorf("pretrain: mask probability %g outside (0, 1)", o.MaskProb)
	case o.WeightDecay < 0:
		return fmt.Errorf("pretrain: weight decay %g is negative", o.WeightDecay)
	case o.Dropout != nil && (*o.Dropout < 0 || *o.Dropout >= 1):
		return fmt.Errorf("pretrain: dropout %g outside [0, 1)", *o.Dropout)
	}
	return nil
}

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

// Run pretrains a BERT encoder with the MLM objective (see the package
// documentation and docs/pretraining.md) and writes the Hugging Face
// directory, checkpoint and metrics into o.Out. Cancelling ctx stops at the
// next step boundary with a checkpoint (resumable) and returns ctx.Err().
//
// Resuming is bitwise: the data order of epoch e is a permutation drawn from
// PCG(seed, e), and the masking and dropout PCG states, AdamW moments and
// step are restored from the checkpoint.
func Run(ctx context.Context, o Options) (*Result, error) {
	start := time.Now()
	statePath := filepath.Join(o.Out, StateFile)
	optsPath := filepath.Join(o.Out, OptionsFile)
	if o.Resume {
		saved, err := readOptions(optsPath)
		if err != nil {
			return nil, fmt.Errorf("pretrain: --resume: %w", err)
		}
		saved.Out, saved.Resume, saved.Progress, saved.StopAfter = o.Out, true, o.Progress, o.StopAfter
		if o.Steps > 0 && o.Steps != saved.Steps {
			slog.Warn("pretrain: --steps changed on resume; the learning-rate schedule changes from here", "was", saved.Steps, "now", o.Steps)
			saved.Steps = o.Steps
		}
		if o.SaveEvery > 0 {
			saved.SaveEvery = o.SaveEvery
		}
		if o.EvalEvery > 0 {
			saved.EvalEvery = o.EvalEvery
		}
		o = saved
	} else if _, err := os.Stat(statePath); err == nil {
		return nil, fmt.Errorf("pretrain: %s already holds a run (%s); use --resume or another --out", o.Out, StateFile)
	}
	o.defaults()
	if err := o.validate(); err != nil {
		return nil, err
	}
	if err := os.MkdirAll(o.Out, 0o755); err != nil {
		return nil, fmt.Errorf("pretrain: %w", err)
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

	var cfg encoder.Config
	switch {
	case o.ModelConfig != nil:
		cfg = *o.ModelConfig
	case o.InitFrom != "":
		if cfg, err = encoder.ReadConfig(filepath.Join(o.InitFrom, "config.json")); err != nil {
			return nil, fmt.Errorf("pretrain: --init-from: %w", err)
		}
		o.Config = "hf:" + o.InitFrom
	case fsutil.IsFile(o.Config):
		if cfg, err = encoder.ReadConfig(o.Config); err != nil {
			return nil, fmt.Errorf("pretrain: %w", err)
		}
	default:
		if cfg, err = encoder.Preset(o.Config); err != nil {
			return nil, fmt.Errorf("pretrain: --config: %w", err)
		}
	}
	if cfg.ModelType != "bert" {
		return nil, fmt.Errorf("pretrain: model type %q; only bert is supported", cfg.ModelType)
	}
	if cfg.VocabSize != tok.VocabSize() && o.InitFrom != "" {
		return nil, fmt.Errorf("pretrain: --init-from %s has vocab_size %d but the tokenizer %s has %d tokens: use the checkpoint's own vocabulary",
			o.InitFrom, cfg.VocabSize, o.Vocab, tok.VocabSize())
	}
	if cfg.VocabSize != tok.VocabSize() {
		slog.Info("pretrain: vocab_size set to the tokenizer's", "config", cfg.VocabSize, "tokenizer", tok.VocabSize())
		cfg.VocabSize = tok.VocabSize()
	}
	cfg.PadTokenID = tok.PadID()
	if o.Dropout != nil && o.ModelConfig == nil {
		cfg.HiddenDropoutProb, cfg.AttentionProbsDropoutProb = *o.Dropout, *o.Dropout
	}
	if o.Seq > cfg.MaxSeqLen() {
		return nil, fmt.Errorf("pretrain: --seq %d exceeds the model's %d positions", o.Seq, cfg.MaxSeqLen())
	}
	if err := cfg.Validate(); err != nil {
		return nil, fmt.Errorf("pretrain: config: %w", err)
	}
	o.ModelConfig = &cfg

	// Corpus.
	pc, err := PrepareCorpus(tok, o.Corpus, o.Seq, o.Holdout, !o.NoPack, o.Seed)
	if err != nil {
		return nil, fmt.Errorf("pretrain: %w", err)
	}
	cinfo, seqs, heldSeqs, heldDocs := pc.Info, pc.Train, pc.HeldOut, pc.HeldOutDocs
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
	evalRng := rand.New(rand.NewPCG(o.Seed, 3))
	var evalBatches []*Batch
	for lo := 0; lo < len(heldSeqs); lo += o.BatchSize {
		idx := make([]int, 0, o.BatchSize)
		for i := lo; i < min(lo+o.BatchSize, len(heldSeqs)); i++ {
			idx = append(idx, i)
		}
		evalBatches = append(evalBatches, makeBatch(heldSeqs, idx, masker, evalRng, tok.PadID()))
	}

	// Model and optimizer.
	initRng := rand.New(rand.NewPCG(o.Seed, 0))
	enc, err := encoder.New(cfg, initRng)
	if err != nil {
		return nil, fmt.Errorf("pretrain: %w", err)
	}
	model := NewModel(enc, initRng)
	params := model.Params()
	if o.InitFrom != "" && !o.Resume {
		n, head, err := initFrom(params, o.InitFrom)
		if err != nil {
			return nil, fmt.Errorf("pretrain: --init-from: %w", err)
		}
		slog.Info("pretrain: initialised from a checkpoint", "dir", o.InitFrom, "tensors", n, "mlm_head_loaded", head)
	}
	opt := nn.NewAdamW(o.LR, 0.9, 0.999, 1e-6, o.WeightDecay)
	maskPCG, dropPCG := rand.NewPCG(o.Seed, 4), rand.NewPCG(o.Seed, 5)
	maskRng, dropRng := rand.New(maskPCG), rand.New(dropPCG)
	warmup := int(math.Round(o.WarmupRatio * float64(o.Steps)))

	step, epoch, pos := 0, 0, 0
	elapsed0 := 0.0
	if o.Resume {
		meta, err := nn.LoadCheckpoint(statePath, params, opt)
		if err != nil {
			return nil, fmt.Errorf("pretrain: --resume: %w", err)
		}
		ints := map[string]*int{"step": &step, "epoch": &epoch, "pos": &pos}
		for k, p := range ints {
			if *p, err = strconv.Atoi(meta[k]); err != nil {
				return nil, fmt.Errorf("pretrain: --resume: %s: metadata %q: %w", statePath, k, err)
			}
		}
		elapsed0, _ = strconv.ParseFloat(meta["elapsed_s"], 64)
		if err := nn.RestoreRNG(meta["mask_rng"], maskPCG); err != nil {
			return nil, fmt.Errorf("pretrain: --resume: %s: mask_rng: %w", statePath, err)
		}
		if err := nn.RestoreRNG(meta["dropout_rng"], dropPCG); err != nil {
			return nil, fmt.Errorf("pretrain: --resume: %s: dropout_rng: %w", statePath, err)
		}
		if err := truncateMetrics(filepath.Join(o.Out, MetricsFile), step); err != nil {
			return nil, fmt.Errorf("pretrain: --resume: %w", err)
		}
		slog.Info("pretrain: resumed", "dir", o.Out, "step", step, "epoch", epoch)
	}
	if err := atomicfile.WriteJSON(optsPath, o); err != nil { // on resume: a changed Steps/SaveEvery/EvalEvery
		return nil, fmt.Errorf("pretrain: %w", err)
	}
	if !o.Resume {
		if err := os.Remove(filepath.Join(o.Out, MetricsFile)); err != nil && !errors.Is(err, os.ErrNotExist) {
			return nil, fmt.Errorf("pretrain: %w", err)
		}
	}
	slog.Info("pretrain: start", "backend", nn.Backend(), "config", o.Config, "params", cfg.NumParams(),
		"documents", cinfo.Documents, "duplicates", cinfo.Duplicates, "train_seqs", len(seqs), "train_tokens", trainTokens,
		"heldout_docs", heldDocs, "heldout_seqs", len(heldSeqs), "steps", o.Steps, "batch", o.BatchSize, "seq", o.Seq)

	mf, err := os.OpenFile(filepath.Join(o.Out, MetricsFile), os.O_CREATE|os.O_APPEND|os.O_WRONLY, 0o644)
	if err != nil {
		return nil, fmt.Errorf("pretrain: %w", err)
	}
	defer mf.Close()
	logMetric := func(m Metric) error {
		b, _ := json.Marshal(m)
		if _, err := mf.Write(append(b, '\n')); err != nil {
			return fmt.Errorf("pretrain: metrics: %w", err)
		}
		return nil
	}
	elapsed := func() float64 { return elapsed0 + time.Since(start).Seconds() }
	evaluate := func() Metric {
		var tot Stats
		var lsum float64
		for _, b := range evalBatches {
			s := model.Evaluate(b)
			lsum += s.Loss * float64(s.Masked)
			tot.Masked += s.Masked
			tot.Correct += s.Correct
		}
		m := Metric{Step: step, Split: "heldout", MaskedTokens: tot.Masked, MaskedAcc: tot.Accuracy(), ElapsedS: elapsed()}
		if tot.Masked > 0 {
			m.Loss = lsum / float64(tot.Masked)
		}
		return m
	}
	save := func() error {
		ms, err := nn.RNGState(maskPCG)
		if err != nil {
			return err
		}
		ds, err := nn.RNGState(dropPCG)
		if err != nil {
			return err
		}
		meta := map[string]string{"step": strconv.Itoa(step), "epoch": strconv.Itoa(epoch), "pos": strconv.Itoa(pos),
			"mask_rng": ms, "dropout_rng": ds, "elapsed_s": strconv.FormatFloat(elapsed(), 'g', -1, 64)}
		if err := nn.SaveCheckpoint(statePath, params, opt, meta); err != nil {
			return fmt.Errorf("pretrain: checkpoint: %w", err)
		}
		return Save(o.Out, model, tokFiles...)
	}

	res := &Result{Out: o.Out, Backend: nn.Backend(), Config: o.Config, NumParams: cfg.NumParams(), Corpus: cinfo,
		TrainSequences: len(seqs), TrainTokens: trainTokens, HeldOutDocs: heldDocs, HeldOutSeqs: len(heldSeqs)}
	if step == 0 {
		m := evaluate()
		res.InitialHeldOut = &m
		if err := logMetric(m); err != nil {
			return nil, err
		}
	}

	var bar *progressbar.ProgressBar
	if o.Progress {
		bar = progressbar.NewOptions(o.Steps, progressbar.OptionSetWriter(os.Stderr), progressbar.OptionSetDescription("pretrain"),
			progressbar.OptionShowCount(), progressbar.OptionShowIts(), progressbar.OptionSetItsString("steps"),
			progressbar.OptionSetPredictTime(true), progressbar.OptionThrottle(250*time.Millisecond),
			progressbar.OptionOnCompletion(func() { fmt.Fprintln(os.Stderr) }))
		_ = bar.Set(step)
	}
	var perm []int
	permEpoch := -1
	var interval Stats
	var intervalLoss float64
	intervalSteps, intervalStart := 0, time.Now()
	emaLoss, emaAcc := math.NaN(), math.NaN()
	var lr float64
	stopped := false
	for step < o.Steps {
		if err := ctx.Err(); err != nil {
			if serr := save(); serr != nil {
				return nil, serr
			}
			return nil, fmt.Errorf("pretrain: interrupted at step %d (checkpoint saved, --resume continues): %w", step, err)
		}
		if pos+o.BatchSize > len(seqs) {
			epoch, pos = epoch+1, 0
		}
		if permEpoch != epoch {
			perm = rand.New(rand.NewPCG(o.Seed^0x9e3779b97f4a7c15, uint64(epoch))).Perm(len(seqs))
			permEpoch = epoch
		}
		b := makeBatch(seqs, perm[pos:pos+o.BatchSize], masker, maskRng, tok.PadID())
		nn.ZeroGrads(params)
		s := model.LossAndGrad(b, dropRng)
		if math.IsNaN(s.Loss) || math.IsInf(s.Loss, 0) {
			return nil, fmt.Errorf("pretrain: step %d: loss is %g (lower --lr?)", step+1, s.Loss)
		}
		if o.GradClip > 0 {
			nn.ClipGradNorm(params, o.GradClip)
		}
		lr = o.LR * nn.LinearWarmupDecay(step, warmup, o.Steps)
		opt.Update(params, lr)
		step++
		pos += o.BatchSize

		interval.Masked += s.Masked
		interval.Correct += s.Correct
		intervalLoss += s.Loss * float64(s.Masked)
		intervalSteps++
		if math.IsNaN(emaLoss) {
			emaLoss, emaAcc = s.Loss, s.Accuracy()
		} else {
			emaLoss, emaAcc = 0.95*emaLoss+0.05*s.Loss, 0.95*emaAcc+0.05*s.Accuracy()
		}
		if bar != nil {
			bar.Describe(fmt.Sprintf("pretrain loss %.3f acc %.3f", emaLoss, emaAcc))
			_ = bar.Set(step)
		}
		last := step == o.Steps || step == o.StopAfter
		if step%o.EvalEvery == 0 || last {
			dt := time.Since(intervalStart).Seconds()
			tm := Metric{Step: step, Split: "train", MaskedTokens: interval.Masked, MaskedAcc: interval.Accuracy(),
				LR: lr, ElapsedS: elapsed(), StepsPerS: float64(intervalSteps) / dt}
			if interval.Masked > 0 {
				tm.Loss = intervalLoss / float64(interval.Masked)
			}
			hm := evaluate()
			if err := logMetric(tm); err != nil {
				return nil, err
			}
			if err := logMetric(hm); err != nil {
				return nil, err
			}
			res.FinalHeldOut = hm
			if bar == nil {
				slog.Info("pretrain", "step", step, "loss", tm.Loss, "masked_acc", tm.MaskedAcc, "heldout_loss", hm.Loss,
					"heldout_acc", hm.MaskedAcc, "steps_per_s", tm.StepsPerS)
			}
			interval, intervalLoss, intervalSteps, intervalStart = Stats{}, 0, 0, time.Now()
		}
		if step%o.SaveEvery == 0 || last {
			if err := save(); err != nil {
				return nil, err
			}
		}
		if step == o.StopAfter && step < o.Steps {
			stopped = true
			break
		}
	}
	if bar != nil {
		_ = bar.Finish()
	}
	if res.FinalHeldOut.Split == "" { // resumed at the end: evaluate once
		res.FinalHeldOut = evaluate()
	}
	res.Steps = step
	res.Epochs = (float64(epoch) + float64(pos)/float64(len(seqs)))
	res.ElapsedS = elapsed()
	res.StoppedEarly = stopped
	res.MaskedTokensPct = 100 * o.MaskProb
	if err := atomicfile.WriteJSON(filepath.Join(o.Out, SummaryFile), res); err != nil {
		return nil, fmt.Errorf("pretrain: %w", err)
	}
	slog.Info("pretrain: done", "out", o.Out, "steps", step, "heldout_loss", res.FinalHeldOut.Loss,
		"heldout_masked_acc", res.FinalHeldOut.MaskedAcc, "elapsed_s", res.ElapsedS)
	return res, nil
}

// PreparedCorpus is what a pretraining run trains and evaluates on: the
// corpus read by ReadCorpus, split by SplitHeldOut and packed by
// BuildSequences (before Run caps the held-out sequences at MaxEvalSeqs).
type PreparedCorpus struct {
	Info           CorpusInfo
	Train, HeldOut []Sequence
	HeldOutDocs    int
}

// PrepareCorpus reads the corpus spec, holds out holdout documents (0: the
// SplitHeldOut default) and packs both parts into sequences of at most seq
// tokens, with the random streams Run uses for a given seed: the split's,
// then PCG(seed, 1) for the training sequences and PCG(seed, 2) for the
// held-out ones. So `nvdp pretrain --seed S` and a caller of
// PrepareCorpus(..., S) see the same sequences. Errors name the corpus.
func PrepareCorpus(tok tokenize.Tokenizer, spec string, seq, holdout int, pack bool, seed uint64) (*PreparedCorpus, error) {
	docs, info, err := ReadCorpus(spec)
	if err != nil {
		return nil, err
	}
	trainDocs, heldDocs, err := SplitHeldOut(docs, holdout, seed)
	if err != nil {
		return nil, fmt.Errorf("corpus %s: %w", spec, err)
	}
	train, err := BuildSequences(tok, trainDocs, seq, pack, rand.New(rand.NewPCG(seed, 1)))
	if err != nil {
		return nil, fmt.Errorf("corpus %s: %w", spec, err)
	}
	held, err := BuildSequences(tok, heldDocs, seq, pack, rand.New(rand.NewPCG(seed, 2)))
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

func readOptions(path string) (Options, error) {
	var o Options
	data, err := os.ReadFile(path)
	if err != nil {
		return o, err
	}
	if err := json.Unmarshal(data, &o); err != nil {
		return o, fmt.Errorf("%s: %w", path, err)
	}
	return o, nil
}

// truncateMetrics keeps the lines of a metrics file up to step (a resumed run
// rewrites what followed its checkpoint).
func truncateMetrics(path string, step int) error {
	f, err := os.Open(path)
	if errors.Is(err, os.ErrNotExist) {
		return nil
	}
	if err != nil {
		return err
	}
	var kept [][]byte
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		var m Metric
		if err := json.Unmarshal(sc.Bytes(), &m); err != nil {
			f.Close()
			return fmt.Errorf("%s: %w", path, err)
		}
		if m.Step <= step {
			kept = append(kept, append([]byte(nil), sc.Bytes()...))
		}
	}
	f.Close()
	if err := sc.Err(); err != nil {
		return fmt.Errorf("%s: %w", path, err)
	}
	return atomicfile.Write(path, func(w io.Writer) error {
		for _, l := range kept {
			if _, err := w.Write(append(l, '\n')); err != nil {
				return err
			}
		}
		return nil
	})
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

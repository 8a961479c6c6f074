package model

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"

	"github.com/nvdp-project/nvdp/encoder"
	"github.com/nvdp-project/nvdp/glue"
	"github.com/nvdp-project/nvdp/internal/atomicfile"
	"github.com/nvdp-project/nvdp/internal/fsutil"
	"github.com/nvdp-project/nvdp/internal/rngstream"
	"github.com/nvdp-project/nvdp/nn"
	"github.com/nvdp-project/nvdp/nvib"
	"github.com/nvdp-project/nvdp/progress"
	"github.com/nvdp-project/nvdp/tokenize"
)

// File names inside a model directory. train.Run writes them with the
// training run's own files, and [Load] reads them.
const (
	OptionsFile = "train_options.json"
	WeightsFile = encoder.WeightsFile // every parameter of the best model (safetensors)
)

// TextModel is a text model (a GLUE task's) with everything needed to run
// it: the NVIB model, its encoder, tokenizer, task and options. Speech
// models are package speech's; package task's Open reads either from a
// directory.
type TextModel struct {
	Model     *nvib.Model
	Encoder   *encoder.Encoder
	Tokenizer tokenize.Tokenizer
	Task      *glue.Task
	Options   *Options
	// TokenizerFiles are the files the tokenizer was read from (copied into model dirs).
	TokenizerFiles []string
	// Dir is the model directory the model was loaded from (Load); ""
	// for a model built in memory (Build).
	Dir string
	// Calibration is the calibration Build made for a privacy target (nil:
	// none made; written to CertificateFile with the model directory).
	Calibration *Calibration
}

// tokenizerFiles resolves the tokenizer path vocab (default: the encoder's
// source directory) and lists the files to copy into a model directory.
func tokenizerFiles(vocab string, enc *encoder.Encoder) (string, []string, error) {
	if vocab == "" {
		if enc.SourceDir == "" {
			return "", nil, optionError("vocab", nil, "required for an encoder without a directory of tokenizer files")
		}
		vocab = enc.SourceDir
	}
	st, err := os.Stat(vocab)
	if err != nil {
		return "", nil, optionError("vocab", vocab, "%v", err)
	}
	if st.IsDir() {
		files := encoder.TokenizerFiles(vocab)
		if len(files) == 0 {
			return "", nil, optionError("vocab", vocab, "no tokenizer files (%s) in the directory", strings.Join(encoder.TokenizerFileNames, ", "))
		}
		return vocab, files, nil
	}
	files := []string{vocab}
	dir := filepath.Dir(vocab)
	extra := []string{"tokenizer_config.json", "special_tokens_map.json"}
	if filepath.Base(vocab) == "vocab.json" {
		extra = append(extra, "merges.txt")
	}
	for _, n := range extra {
		if p := filepath.Join(dir, n); fsutil.IsFile(p) {
			files = append(files, p)
		}
	}
	return vocab, files, nil
}

// Build creates the model of the checked options c, from [Check] or
// [Resume], which are not checked again. It creates the encoder from Encoder,
// where scratch presets get the tokenizer's vocabulary size; the NVIB or NVDP
// block and the head, initialised from the seed, with the clipping calibrated
// to a privacy target as in TextModel.Calibration; and the tokenizer. report,
// when not nil, receives the bytes of a hub download.
//
// It returns an error for options that no [Check] made, for the encoder's and
// tokenizer's files, and for a length beyond the encoder's positions.
func Build(c Checked, report progress.Func) (*TextModel, error) {
	if err := c.check(); err != nil {
		return nil, err
	}
	o := &c.o // a copy: the calibration writes its constants into it
	task, err := glue.LookupTask(o.Task)
	if err != nil {
		return nil, err
	}
	initRng := rngstream.TrainInit.Rand(o.Seed, 0)
	var enc *encoder.Encoder
	var tok tokenize.Tokenizer
	var files []string
	if name, ok := strings.CutPrefix(o.Encoder, ScratchPrefix); ok {
		vocab, fs, err := tokenizerFiles(o.Vocab, &encoder.Encoder{})
		if err != nil {
			return nil, err
		}
		if tok, err = tokenize.Load(vocab); err != nil {
			return nil, optionError("vocab", vocab, "%v", err)
		}
		files = fs
		var cfg encoder.Config
		if o.ScratchConfig != nil {
			cfg = *o.ScratchConfig
		} else if cfg, err = encoder.Preset(name); err != nil {
			return nil, optionError("encoder", o.Encoder, "%v", err)
		}
		cfg.VocabSize = tok.VocabSize()
		cfg.PadTokenID = tok.PadID()
		applyDropout(&cfg, o.Dropout)
		if enc, err = encoder.New(cfg, initRng); err != nil {
			return nil, optionError("encoder", o.Encoder, "%v", err)
		}
	} else {
		if enc, err = encoder.Load(o.Encoder, encoder.LoadOptions{Rng: initRng, Progress: report}); err != nil {
			return nil, optionError("encoder", o.Encoder, "%v", err)
		}
		applyDropout(&enc.Config, o.Dropout)
		vocab, fs, err := tokenizerFiles(o.Vocab, enc)
		if err != nil {
			return nil, err
		}
		if tok, err = tokenize.Load(vocab); err != nil {
			return nil, fmt.Errorf("tokenizer: %w", err)
		}
		files = fs
		if tok.VocabSize() > enc.Config.VocabSize {
			return nil, fmt.Errorf("tokenizer %s has %d entries, encoder vocab_size is %d", vocab, tok.VocabSize(), enc.Config.VocabSize)
		}
	}
	if o.MaxSeqLen > enc.Config.MaxSeqLen() {
		return nil, optionError("max_seq_len", o.MaxSeqLen, "exceeds the encoder's %d positions", enc.Config.MaxSeqLen())
	}
	cfg, cert, err := PrepareModelConfig(o, enc.Config, task.NumLabels)
	if err != nil {
		return nil, err
	}
	m, err := nvib.NewModel(cfg, nvib.EncoderBackbone{Encoder: enc}, initRng)
	if err != nil {
		return nil, err
	}
	return &TextModel{Model: m, Encoder: enc, Tokenizer: tok, Task: task, Options: o, TokenizerFiles: files, Calibration: cert}, nil
}

// applyDropout sets the encoder's hidden and attention dropout to p.
func applyDropout(c *encoder.Config, p float64) {
	c.HiddenDropoutProb, c.AttentionProbsDropoutProb = p, p
}

// SaveFiles writes the static files of a model directory: config.json for
// the encoder, nvdp_config.json, train_options.json and the tokenizer files.
func SaveFiles(dir string, b *TextModel) error {
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return err
	}
	cj, err := b.Encoder.Config.JSON()
	if err != nil {
		return err
	}
	if err := atomicfile.WriteBytes(filepath.Join(dir, encoder.ConfigFile), cj); err != nil {
		return err
	}
	if err := nvib.SaveConfig(dir, b.Model.Cfg); err != nil {
		return err
	}
	if err := SaveOptions(dir, b.Options); err != nil {
		return err
	}
	if err := atomicfile.CopyInto(dir, b.TokenizerFiles); err != nil {
		return fmt.Errorf("tokenizer file: %w", err)
	}
	return nil
}

// Load loads a model directory written by train.Run: config.json,
// nvdp_config.json, train_options.json, model.safetensors with every
// parameter, and the tokenizer files.
func Load(dir string) (*TextModel, error) {
	o, err := LoadOptions(dir)
	if err != nil {
		return nil, err
	}
	task, err := glue.LookupTask(o.Task)
	if err != nil {
		return nil, fmt.Errorf("model dir %s: %w", dir, err)
	}
	ecfg, err := encoder.ReadConfig(filepath.Join(dir, encoder.ConfigFile))
	if err != nil {
		return nil, fmt.Errorf("model dir %s: %w", dir, err)
	}
	initRng := rngstream.TrainInit.Rand(o.Seed, 0)
	enc, err := encoder.New(ecfg, initRng)
	if err != nil {
		return nil, fmt.Errorf("model dir %s: %w", dir, err)
	}
	cfg, err := nvib.LoadConfig(dir)
	if err != nil {
		return nil, fmt.Errorf("model dir %s: %w", dir, err)
	}
	m, err := nvib.NewModel(cfg, nvib.EncoderBackbone{Encoder: enc}, initRng)
	if err != nil {
		return nil, fmt.Errorf("model dir %s: %w", dir, err)
	}
	wpath := filepath.Join(dir, WeightsFile)
	if !fsutil.IsFile(wpath) {
		return nil, fmt.Errorf("model dir %s: no %s (training has not finished an epoch yet?)", dir, WeightsFile)
	}
	if _, err := nn.LoadCheckpoint(wpath, m.Params(), nil); err != nil {
		return nil, fmt.Errorf("model dir %s: %w", dir, err)
	}
	tok, err := tokenize.Load(dir)
	if err != nil {
		return nil, fmt.Errorf("model dir %s: %w", dir, err)
	}
	return &TextModel{Model: m, Encoder: enc, Tokenizer: tok, Task: task, Options: o, Dir: dir}, nil
}

package attack

import (
	"context"
	"errors"
	"fmt"

	"github.com/nvdp-project/nvdp/glue"
	"github.com/nvdp-project/nvdp/model"
	"github.com/nvdp-project/nvdp/option"
	"github.com/nvdp-project/nvdp/privacy"
	"github.com/nvdp-project/nvdp/progress"
	"github.com/nvdp-project/nvdp/release"
	"github.com/nvdp-project/nvdp/tokenize"
)

// Target is a trained model under attack: the release it makes, a
// [release.Releaser] giving out what `nvdp embed` and `nvdp serve` give out,
// and, for the attacks' non-private references, the model itself, with its
// encoder output and the release's mean without noise. The attacker knows
// the mechanism, as differential privacy assumes: only the noise is secret.
//
// A Target is not safe for concurrent use: its attacks run the model
// between releases, one computation at a time.
type Target struct {
	rel    *release.Releaser
	bundle *model.TextModel
}

// LoadTarget reads a model directory for attack. The models are those of
// [release.Load]: an NVDP-Clipped or gaussian model with a finite
// certificate.
func LoadTarget(dir string) (*Target, error) {
	b, err := model.Load(dir)
	if err != nil {
		return nil, fmt.Errorf("attack: %w", err)
	}
	return NewTarget(b)
}

// NewTarget is [LoadTarget] of a model in memory, as [model.Build] gives it.
// The target must be the only user of b from then on.
func NewTarget(b *model.TextModel) (*Target, error) {
	r, err := release.New(b, release.Options{AllowUnproved: true}) // an attack measures any release, proved or not
	if err != nil {
		return nil, fmt.Errorf("attack: %w", err)
	}
	return &Target{rel: r, bundle: b}, nil
}

// Releaser is the target's release.
func (t *Target) Releaser() *release.Releaser { return t.rel }

// Task is the GLUE task the model was trained on.
func (t *Target) Task() *glue.Task { return t.bundle.Task }

// GlueDir returns the GLUE directory the model was trained with, from its
// options.
func (t *Target) GlueDir() string { return t.bundle.Options.GlueDir }

// Tokenizer is the model's tokenizer: the attacks' labels are its token ids.
func (t *Target) Tokenizer() tokenize.Tokenizer { return t.bundle.Tokenizer }

// CheckVocabulary reports whether tok has the model's vocabulary, with the
// same size and the same token at every id, since the attacker's tokenizer
// must label tokens as the model reads them. The error names the first id
// that differs.
func (t *Target) CheckVocabulary(tok tokenize.Tokenizer) error {
	mine := t.bundle.Tokenizer
	if a, b := tok.VocabSize(), mine.VocabSize(); a != b {
		return fmt.Errorf("%d tokens, the model's vocabulary has %d", a, b)
	}
	for id := range mine.VocabSize() {
		if a, b := tok.IDToToken(id), mine.IDToToken(id); a != b {
			return fmt.Errorf("id %d is %q, the model's is %q", id, a, b)
		}
	}
	return nil
}

// CorpusOptions choose the attacker's public texts and the victims' from
// the target's GLUE task: the attacker holds the task's train split as
// public text of the same kind, the victims are the dev split's texts.
type CorpusOptions struct {
	GlueDir string `json:"glue_dir"` // the directory with <TASK>/{train,dev}.tsv
	// PublicLimit and VictimLimit keep the first K examples of the train and
	// dev splits (0: all).
	PublicLimit int  `json:"public_limit"`
	VictimLimit int  `json:"victim_limit"`
	SkipBadRows bool `json:"skip_bad_rows"` // skip malformed TSV rows (logged) instead of failing
}

// DefaultCorpusOptions returns the default corpus: 5000 public texts, which
// are the decoders' training set and make the attacks' cost grow, and every
// dev text. The GLUE directory is the caller's; [Target.GlueDir] gives the
// model's.
func DefaultCorpusOptions() CorpusOptions { return CorpusOptions{PublicLimit: 5000} }

// Validate checks o: a GLUE directory, limits >= 0. Errors are
// *option.Error.
func (o CorpusOptions) Validate() error {
	switch {
	case o.GlueDir == "":
		return option.Errorf("glue_dir", nil, "required: the directory with <TASK>/{train,dev}.tsv")
	case o.PublicLimit < 0:
		return option.Errorf("public_limit", o.PublicLimit, "must be >= 0 (0: all)")
	case o.VictimLimit < 0:
		return option.Errorf("victim_limit", o.VictimLimit, "must be >= 0 (0: all)")
	}
	return nil
}

// Corpus is what the attacks run on: the attacker's public texts and the
// victims' texts. Only the texts enter the attacks; the paths say where
// they come from.
type Corpus struct {
	Public  []string `json:"-"`
	Victims []string `json:"-"`
	// PublicPath and VictimPath are the files the texts were read from
	// ("" for texts given in memory).
	PublicPath string `json:"public_path,omitempty"`
	VictimPath string `json:"victim_path,omitempty"`
}

// The splits of a corpus: the attacker's public text and the victims'.
const (
	publicSplit = "train"
	victimSplit = "dev"
)

// LoadCorpus reads the corpus of task from o.GlueDir with [model.LoadSplit].
// It keeps the first text of each example, [glue.Example].TextA, since a
// release is of one text and a pair task's second text is not used, and
// checks it as [release.CheckText] does.
//
// It returns an error for invalid options, a missing or malformed file, a
// split without examples, or a text that cannot be released, naming its
// file:line.
func LoadCorpus(task *glue.Task, o CorpusOptions) (*Corpus, error) {
	if err := o.Validate(); err != nil {
		return nil, err
	}
	c := &Corpus{}
	for _, s := range []struct {
		split string
		limit int
		texts *[]string
		path  *string
	}{{publicSplit, o.PublicLimit, &c.Public, &c.PublicPath}, {victimSplit, o.VictimLimit, &c.Victims, &c.VictimPath}} {
		ds, err := model.LoadSplit(o.GlueDir, task, s.split, glue.LoadOptions{Limit: s.limit, SkipBadRows: o.SkipBadRows})
		if err != nil {
			return nil, fmt.Errorf("attack: %w", err)
		}
		*s.path = ds.Path
		*s.texts = make([]string, len(ds.Examples))
		for i, ex := range ds.Examples {
			if err := release.CheckText(ex.TextA); err != nil {
				return nil, fmt.Errorf("attack: %s:%d: %w", ds.Path, ex.Line, err)
			}
			(*s.texts)[i] = ex.TextA
		}
	}
	return c, nil
}

// check rejects a corpus with no public or no victim text, or a text that
// cannot be released (naming which).
func (c *Corpus) check() error {
	if c == nil {
		return errors.New("attack: no corpus")
	}
	for _, s := range []struct {
		name  string
		texts []string
	}{{"public", c.Public}, {"victim", c.Victims}} {
		if len(s.texts) == 0 {
			return fmt.Errorf("attack: no %s texts", s.name)
		}
		for i, text := range s.texts {
			if err := release.CheckText(text); err != nil {
				return fmt.Errorf("attack: %s text %d: %w", s.name, i, err)
			}
		}
	}
	return nil
}

// LearnedOptions are the options that the learned attacks, [Invert] and
// [Attribute], share.
type LearnedOptions struct {
	// ReleasesPerText is the number k of releases of each public text the
	// attacker trains on (>= 1); each victim text is released once.
	ReleasesPerText int `json:"releases_per_text"`
	// Seed seeds the releases' noise (release.NewSeededSource), the learned
	// attackers' initialisation and data order, and the intervals' draws.
	Seed uint64 `json:"seed"`
	Learner
	Interval
}

// defaultLearned is one release per public text, seed 1, the learners
// training the given epochs of batches of 64 at learning rate 1e-3 without
// weight decay, the MLP 256 wide, and DefaultInterval.
func defaultLearned(epochs int) LearnedOptions {
	return LearnedOptions{ReleasesPerText: 1, Seed: 1, Learner: Learner{Epochs: epochs, BatchSize: 64, LR: 1e-3, Hidden: 256},
		Interval: DefaultInterval()}
}

// Validate checks o; errors are *option.Error.
func (o LearnedOptions) Validate() error {
	if o.ReleasesPerText < 1 {
		return option.Errorf("releases_per_text", o.ReleasesPerText, "must be >= 1")
	}
	if err := o.Learner.Validate(); err != nil {
		return err
	}
	return o.Interval.Validate()
}

// Setup is what the report of a learned attack starts with: the model
// attacked, the certified guarantee of one release of one text, since the
// victims are released once each, and the corpus.
type Setup struct {
	Model       release.ModelInfo  `json:"model"`
	Certified   *privacy.Guarantee `json:"certified"`
	Corpus      *Corpus            `json:"corpus"`
	PublicTexts int                `json:"public_texts"`
	VictimTexts int                `json:"victim_texts"`
}

// prepare tokenises the texts of a checked corpus c (as encode), before
// any release; it returns the report's Setup.
func (t *Target) prepare(c *Corpus) (s Setup, public, victims []tokenize.Encoding, err error) {
	if public, err = t.encode("public", c.Public); err != nil {
		return s, nil, nil, err
	}
	if victims, err = t.encode("victim", c.Victims); err != nil {
		return s, nil, nil, err
	}
	return Setup{Model: t.rel.Model(), Certified: t.rel.Guarantee(), Corpus: c, PublicTexts: len(c.Public), VictimTexts: len(c.Victims)},
		public, victims, nil
}

// encode tokenises texts as a release does (release.Releaser.Release:
// truncated to max_seq_len, the specials included). Errors name the text.
func (t *Target) encode(what string, texts []string) ([]tokenize.Encoding, error) {
	padLen := t.rel.Model().MaxSeqLen
	encs := make([]tokenize.Encoding, len(texts))
	for i, text := range texts {
		enc, err := t.bundle.Tokenizer.Encode(text, "", padLen)
		if err != nil {
			return nil, fmt.Errorf("attack: %s text %d: tokenize: %w", what, i, err)
		}
		encs[i] = enc
	}
	return encs, nil
}

// isSpecial reports whether id is one of the tokenizer's special tokens
// (padding, unknown, [CLS]/<s>, [SEP]/</s>, [MASK]/<mask>): no position
// holding one is attacked or scored, and no decoder predicts one.
func (t *Target) isSpecial(id int) bool {
	tok := t.bundle.Tokenizer
	return id == tok.PadID() || id == tok.UnkID() || id == tok.CLSID() || id == tok.SEPID() || id == tok.MaskID()
}

// view is one text as collect hands it to a visitor. Component t of a
// release (t = 1..n, n = enc.Len()) is token t-1 of enc; component 0 is the
// prior's and components n+1..N-1 are padding.
type view struct {
	enc      tokenize.Encoding   // the text's tokens as the model reads them
	releases []release.Embedding // k releases: Z [N*P], pi [N]
	x        []float32           // the encoder output [S*H], S = max_seq_len: row j is token j (j >= n: padding)
	mu       []float32           // the release's mean without noise [N*P] (the clipped posterior mean)
}

// collect releases each text k times from src and computes, batch by batch
// (the releaser's batch size), its encoder output and noiseless mean, and
// hands them to visit text by text, in order; nothing is kept. stage names
// the progress reported (texts done). Cancelling ctx stops between batches.
func (t *Target) collect(ctx context.Context, texts []string, encs []tokenize.Encoding, k int, src *release.Source,
	report progress.Func, stage string, visit func(i int, v view)) error {
	info := t.rel.Model()
	S, N, P := info.MaxSeqLen, info.N, info.P
	H := t.bundle.Model.Cfg.Hidden
	batch := &model.Encoded{Encs: encs, PadID: t.bundle.Tokenizer.PadID()}
	count := report.Counter(stage, "texts", int64(len(texts)))
	count(0)
	bs := t.rel.BatchSize()
	for lo := 0; lo < len(texts); lo += bs {
		if err := ctx.Err(); err != nil {
			return err
		}
		hi := min(lo+bs, len(texts))
		rels, err := t.rel.ReleaseRepeated(ctx, texts[lo:hi], k, src)
		if err != nil {
			return fmt.Errorf("attack: %s texts %d..%d: %w", stage, lo, hi-1, err)
		}
		idx := make([]int, hi-lo)
		for i := range idx {
			idx[i] = lo + i
		}
		in, _ := batch.Batch(idx, S)
		post, x, err := t.bundle.Model.EncodePosterior(in)
		if err != nil {
			return fmt.Errorf("attack: %s texts %d..%d: %w", stage, lo, hi-1, err)
		}
		if post.N != N || post.P != P || x.Dim(-1) != H || x.Dim(1) != S {
			panic(fmt.Sprintf("attack: posterior [%d,%d] and encoder output %v, the release is [%d,%d] at length %d", post.N, post.P, x.Shape, N, P, S))
		}
		for i := range hi - lo {
			visit(lo+i, view{enc: encs[lo+i], releases: rels[i],
				x: x.Data[i*S*H : (i+1)*S*H], mu: post.Mu.Data[i*N*P : (i+1)*N*P]})
		}
		count(int64(hi))
	}
	return nil
}

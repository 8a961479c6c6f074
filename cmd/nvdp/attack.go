package main

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strconv"

	"github.com/nvdp-project/nvdp/attack"
	"github.com/nvdp-project/nvdp/internal/atomicfile"
	"github.com/nvdp-project/nvdp/model"
	"github.com/nvdp-project/nvdp/privacy"
	"github.com/nvdp-project/nvdp/release"
	"github.com/nvdp-project/nvdp/report"
	"github.com/nvdp-project/nvdp/train"
	"github.com/spf13/cobra"
)

// attackCmd is `nvdp attack`, the parent of the attacks on a release
// (docs/attacks.md); each attack's file registers its subcommand on it in
// init().
var attackCmd = newAttackCmd()

func newAttackCmd() *cobra.Command {
	return &cobra.Command{
		Use:   "attack",
		Short: "Attacks on a release: what it actually leaks, against the certified guarantee",
		Long: `Empirical privacy attacks on the releases of a trained model (docs/attacks.md). Their numbers
are what an attacker achieves, to be read against the certified guarantee ('nvdp certify'): an
attack that exceeds the certified epsilon shows a bug in the mechanism, the density or the
certificate.`,
		Args: cobra.NoArgs,
	}
}

func init() {
	attackCmd.AddCommand(newDistinguishCmd())
	rootCmd.AddCommand(attackCmd)
}

// distinguishFlags are the flags of `nvdp attack distinguish`.
type distinguishFlags struct {
	opt                                                       attack.DistinguishOptions
	model, posteriors, pair, pairIndex, audit, split, glueDir string
	out, plotDir                                              string
	texts                                                     []string
	randomPairs                                               int
	jsonOut, noProgress                                       bool
}

func newDistinguishCmd() *cobra.Command {
	f := &distinguishFlags{opt: attack.DefaultDistinguishOptions()}
	cmd := &cobra.Command{
		Use:   "distinguish --model DIR [--pair witness|argmax|random] [--texts A,B | --posteriors FILE --pair-index i,j]",
		Short: "Distinguishing attack: an epsilon lower bound from the likelihood-ratio test between two inputs' releases",
		Long: `Tell apart the releases of two inputs by the most powerful test: draw --releases K releases of
each input's clipped posterior with the model's own sampler, score each by the exact
log-likelihood ratio of the release density (Dirichlet weights times independent Gaussians; Z
alone for a gaussian model), and report the ROC, the TPR at FPR 1e-3 and 1e-2, and a lower bound
on epsilon at --delta with Clopper-Pearson intervals at --confidence: with that confidence the
release is not (eps, delta)-DP for any eps below it. Two methods: the threshold test
(ln((TPR_lo - delta) / FPR_hi), Jagielski et al. 2020, Nasr et al. 2021; black-box, at most about
ln(K/7.4)) and the privacy-loss test (t + ln(1 - delta/p_lo) for P_q(L >= t) >= p_lo, valid because
L is the exact density ratio; not capped by K). The method, direction and threshold are chosen on
releases [0, K/2) of each input and the bound is computed on [K/2, K). The certified epsilon of the
model at the same delta and the ratio are printed beside it; a bound above the certificate is a bug.

The pair (the candidate inputs an attacker knows, docs/attacks.md):
  --pair witness   the pair that attains the certified bound at the best order of the (epsilon,
                   delta) guarantee (computed from --model), or the 2 posteriors of
                   --posteriors FILE written by 'nvdp certify --witness FILE'
  --pair argmax    the audit's pair with the largest empirical RD among the posteriors of
                   --posteriors FILE or, without it, of the --split texts under --model (computed
                   in memory, in the split's order, as 'nvdp run' audits them), found by the audit
                   (order 1.1) or read from --audit (the JSON of 'nvdp audit --json', or a run's
                   report.json: its indices are the split's)
  --pair random    --random-pairs pairs drawn from those posteriors (--seed)
  --texts A,B      two texts under --model (comma-separated, CSV quoting for commas)
  --pair-index i,j posteriors i and j of the posterior file

--json prints the report (one object: model, certified guarantee, per pair the result);
--out FILE writes it too; --plot-dir DIR writes the ROC figures (distinguish_roc.{png,svg},
linear and log-log, with the boundary the certified (epsilon, delta) allows).`,
		Example: `  nvdp attack distinguish --model runs/sst2-clipped --json
  nvdp attack distinguish --model runs/sst2-clipped --pair argmax --releases 100000 --plot-dir figs
  nvdp attack distinguish --model runs/sst2-clipped --texts "the movie is great","the movie is awful"
  nvdp certify --model runs/sst2-clipped --witness w.safetensors && nvdp attack distinguish --posteriors w.safetensors`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, args []string) error { return runDistinguish(cmd, f) },
	}
	fs := cmd.Flags()
	o := &f.opt
	fs.StringVar(&f.model, "model", "", "model directory written by nvdp run or nvdp train (nvdp-clipped or gaussian)")
	fs.StringVar(&f.posteriors, "posteriors", "", "posterior file: a witness (nvdp certify --witness) or the posteriors to take pairs from")
	fs.StringVar(&f.pair, "pair", attack.PairWitness, "candidate pair: witness | argmax | random")
	fs.StringSliceVar(&f.texts, "texts", nil, "two texts A,B to tell apart under --model")
	fs.StringVar(&f.pairIndex, "pair-index", "", "i,j: posteriors i and j of the posterior file")
	fs.StringVar(&f.audit, "audit", "", "--pair argmax: read the argmax from this audit JSON (nvdp audit --json, or a run's report.json) instead of auditing")
	fs.StringVar(&f.split, "split", "dev", "without --posteriors: the split whose posteriors under --model give the pairs (dev | test | train)")
	fs.StringVar(&f.glueDir, "glue-dir", "", "the GLUE directory of --split (default: the model's, train_options.json glue_dir)")
	fs.IntVar(&f.randomPairs, "random-pairs", 1, "--pair random: how many pairs")
	fs.IntVar(&o.Releases, "releases", o.Releases, "K, releases drawn from each posterior (the threshold test's bound is at most about ln(K/7.4))")
	fs.Float64Var(&o.Delta, "delta", o.Delta, "delta of the lower bound and of the certified epsilon it is compared with")
	fs.Float64Var(&o.Confidence, "confidence", o.Confidence, "confidence of the lower bound (Clopper-Pearson)")
	fs.Uint64Var(&o.Seed, "seed", o.Seed, "seed of the releases (and of --pair random)")
	fs.IntVar(&o.Workers, "workers", 0, "goroutines drawing releases (default GOMAXPROCS)")
	fs.BoolVar(&f.jsonOut, "json", false, "print the report as one JSON object on stdout")
	fs.StringVar(&f.out, "out", "", "also write the JSON report to this file (conventionally "+attack.DistinguishFile+")")
	fs.StringVar(&f.plotDir, "plot-dir", "", "write the ROC figures (PNG and SVG) into this directory")
	fs.BoolVar(&f.noProgress, "no-progress", false, "no progress bar on stderr (there is none when stderr is not a terminal)")
	return cmd
}

// kind checks the flags that need no file and returns the kind of pair.
func (f *distinguishFlags) kind(cmd *cobra.Command) (string, error) {
	fs := cmd.Flags()
	if err := f.opt.Validate(); err != nil {
		return "", flagError(err)
	}
	kind := f.pair
	switch {
	case fs.Changed("texts") && fs.Changed("pair-index"):
		return "", errors.New("--texts and --pair-index: give one pair")
	case fs.Changed("texts") || fs.Changed("pair-index"):
		flag := map[bool]string{true: "texts", false: "pair-index"}[fs.Changed("texts")]
		if fs.Changed("pair") {
			return "", fmt.Errorf("--%s and --pair: --%s is the pair", flag, flag)
		}
		kind = map[bool]string{true: attack.PairTexts, false: attack.PairIndex}[fs.Changed("texts")]
	}
	switch kind {
	case attack.PairWitness, attack.PairArgmax, attack.PairRandom, attack.PairTexts, attack.PairIndex:
	default:
		return "", fmt.Errorf("--pair %q: want witness, argmax or random (or --texts, --pair-index)", f.pair)
	}
	switch {
	case f.model == "" && f.posteriors == "":
		return "", errors.New("--model DIR or --posteriors FILE is required")
	case kind == attack.PairTexts && f.model == "":
		return "", errors.New("--texts needs --model (the texts' posteriors come from the model)")
	case kind == attack.PairTexts && len(f.texts) != 2:
		return "", fmt.Errorf("--texts: %d texts, want 2 (A,B; quote a text with a comma: '\"a, b\",c')", len(f.texts))
	case fs.Changed("audit") && kind != attack.PairArgmax:
		return "", errors.New("--audit gives the argmax pair: use it with --pair argmax")
	case fs.Changed("random-pairs") && kind != attack.PairRandom:
		return "", errors.New("--random-pairs is for --pair random")
	case f.randomPairs < 1:
		return "", fmt.Errorf("--random-pairs %d: want >= 1", f.randomPairs)
	case (fs.Changed("split") || fs.Changed("glue-dir")) && (f.posteriors != "" || f.model == ""):
		return "", errors.New("--split and --glue-dir choose the posteriors computed under --model; with --posteriors FILE that file is used")
	}
	return kind, nil
}

// pairIndices parses --pair-index.
func (f *distinguishFlags) pairIndices() (i, j int, err error) {
	v, err := parseListOf("--pair-index", f.pairIndex, "an index >= 0", strconv.Atoi)
	if err != nil {
		return 0, 0, err
	}
	if len(v) != 2 || v[0] < 0 || v[1] < 0 {
		return 0, 0, fmt.Errorf("--pair-index %q: want i,j, two indices >= 0", f.pairIndex)
	}
	return v[0], v[1], nil
}

// runDistinguish checks the flags, loads the model and the posteriors the
// pair needs, attacks each candidate pair and writes the report.
func runDistinguish(cmd *cobra.Command, f *distinguishFlags) error {
	kind, err := f.kind(cmd)
	if err != nil {
		return err
	}
	var pi, pj int
	if kind == attack.PairIndex {
		if pi, pj, err = f.pairIndices(); err != nil {
			return err
		}
	}
	ctx, cancel := signalContext(cmd, "stopping the releases")
	defer cancel()
	prog := newProgress(cmd, f.noProgress)
	rep := &attack.DistinguishReport{Attack: attack.AttackDistinguish}
	r, file, err := f.load(kind, rep)
	if err != nil {
		return err
	}
	spec := attack.PairSpec{Kind: kind, Texts: f.texts, Index: [2]int{pi, pj}, Audit: f.audit, RandomPairs: f.randomPairs}
	cands, err := attack.Candidates(ctx, spec, r, file, f.source(), f.opt.Delta, f.opt.Seed, prog)
	if err != nil {
		if kind == attack.PairWitness && file == nil {
			return fmt.Errorf("--model %s: %w", f.model, err)
		}
		return flagError(err)
	}
	opt := f.opt
	opt.Progress = prog
	if err := attack.DistinguishPairs(ctx, rep, cands, opt); err != nil {
		return err
	}
	return f.write(cmd, rep)
}

// load loads --model (nil without it) and, unless the pair needs none, the
// posteriors of the pairs, recording in rep the model, the posteriors'
// source and the certified guarantee (the model's, else the file's).
func (f *distinguishFlags) load(kind string, rep *attack.DistinguishReport) (*release.Releaser, *privacy.Posteriors, error) {
	var r *release.Releaser
	var err error
	if f.model != "" {
		if r, err = release.Load(f.model, release.Options{AllowUnproved: true}); err != nil { // an attack measures any release
			return nil, nil, fmt.Errorf("--model: %w", err)
		}
		if err := r.SetDelta(f.opt.Delta); err != nil {
			return nil, nil, fmt.Errorf("--delta: %w", err)
		}
		info := r.Model()
		rep.Model, rep.Task, rep.Variant, rep.Certified = f.model, info.Task, info.Variant, r.Guarantee()
	}
	if kind == attack.PairTexts || (kind == attack.PairWitness && f.posteriors == "") {
		return r, nil, nil
	}
	file, err := f.readPosteriors(r)
	if err != nil {
		return nil, nil, err
	}
	rep.Posteriors = f.posteriors
	if f.posteriors == "" {
		rep.Split = f.split
	}
	if rep.Certified == nil {
		if rep.Certified, err = attack.FileGuarantee(file, f.opt.Delta); err != nil {
			return nil, nil, fmt.Errorf("--posteriors %s: %w", rep.Posteriors, err)
		}
	}
	return r, file, nil
}

// write writes the ROC figures (--plot-dir) and the JSON report (--out),
// then prints the report on stdout (as JSON with --json).
func (f *distinguishFlags) write(cmd *cobra.Command, rep *attack.DistinguishReport) error {
	if f.plotDir != "" {
		if err := os.MkdirAll(f.plotDir, 0o755); err != nil {
			return fmt.Errorf("--plot-dir: %w", err)
		}
		var err error
		if rep.Plots, err = report.PlotDistinguishROC(rep, filepath.Join(f.plotDir, "distinguish_roc")); err != nil {
			return fmt.Errorf("--plot-dir: %w", err)
		}
	}
	if f.out != "" {
		if err := atomicfile.WriteJSON(f.out, rep); err != nil {
			return fmt.Errorf("--out: %w", err)
		}
	}
	if f.jsonOut {
		return printJSON(cmd.OutOrStdout(), rep)
	}
	return rep.WriteText(cmd.OutOrStdout())
}

// readPosteriors reads --posteriors or, without it, computes the model's
// posteriors of --split in memory (train.SplitPosteriors); with a model,
// their shape must be the model's release.
func (f *distinguishFlags) readPosteriors(r *release.Releaser) (*privacy.Posteriors, error) {
	if f.posteriors != "" {
		p, err := privacy.ReadPosteriors(f.posteriors)
		if err != nil {
			return nil, fmt.Errorf("--posteriors: %w", err)
		}
		if r != nil {
			if n, pp := r.Shape(); p.N != n || p.P != pp {
				return nil, fmt.Errorf("--posteriors %s: posteriors of [N %d, P %d], the model releases [N %d, P %d]", f.posteriors, p.N, p.P, n, pp)
			}
		}
		return p, nil
	}
	b, err := model.Load(f.model)
	if err != nil {
		return nil, fmt.Errorf("--model: %w", err)
	}
	p, err := train.SplitPosteriors(b, f.split, f.glueDir)
	if err != nil {
		return nil, fmt.Errorf("--model %s, --split %s: %w", f.model, f.split, flagError(err))
	}
	return p, nil
}

// source names the posteriors the pairs come from.
func (f *distinguishFlags) source() string {
	if f.posteriors != "" {
		return f.posteriors
	}
	return fmt.Sprintf("the %s split under %s", f.split, f.model)
}

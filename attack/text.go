package attack

import (
	"fmt"
	"io"
	"strings"
	"text/tabwriter"

	"github.com/nvdp-project/nvdp/privacy"
)

// WriteText writes rep as the table `nvdp attack distinguish` prints: the
// model or posteriors, the certified epsilon, then per pair its releases,
// divergences, tests and epsilon lower bound, and the plot files.
func (rep *DistinguishReport) WriteText(w io.Writer) error {
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	row := func(k, v string) { fmt.Fprintf(tw, "%s\t%s\n", k, v) }
	if rep.Model != "" {
		row("model", fmt.Sprintf("%s (%s, %s)", rep.Model, rep.Task, rep.Variant))
	}
	if rep.Posteriors != "" {
		row("posteriors", rep.Posteriors)
	}
	if g := rep.Certified; g != nil {
		row(fmt.Sprintf("certified ε (δ %g)", g.Delta), privacy.FormatValue(g.Epsilon)+", "+g.How()+"  ("+g.Scope+")")
		if g.Release != nil {
			row("release", g.Release.String())
		}
	} else {
		row("certified ε", "unknown: the posterior file carries no clip constants")
	}
	for _, pr := range rep.Pairs {
		r := pr.Result
		name := pr.Kind
		switch {
		case len(pr.Texts) == 2:
			name += fmt.Sprintf(" %q | %q", pr.Texts[0], pr.Texts[1])
		case len(pr.Index) == 2:
			name += fmt.Sprintf(" (%d, %d)", pr.Index[0], pr.Index[1])
		}
		if pr.AuditRD != nil {
			name += fmt.Sprintf(", audit RD %s at order %g", privacy.FormatValue(*pr.AuditRD), pr.AuditOrder)
		}
		row("pair", name)
		row("  releases", fmt.Sprintf("%d of each (N %d, P %d), seed %d; test chosen on half, bounded on the other", r.Releases, r.N, r.P, r.Seed))
		pairEps := fmt.Sprintf("KL %s / %s nats; the pair's own RDP ε %s", privacy.FormatValue(r.KL), privacy.FormatValue(r.KLReverse), privacy.FormatValue(r.PairEpsilon))
		if r.GaussianEpsilon != nil {
			pairEps += fmt.Sprintf("; Gaussian mechanism (μ %.4g) exact ε %s", float64(*r.GaussianMu), privacy.FormatValue(*r.GaussianEpsilon))
		}
		row("  divergence", pairEps)
		var tprs []string
		for _, op := range r.TPRAtFPR {
			tprs = append(tprs, fmt.Sprintf("%.4f at FPR %g", op.TPR, op.FPR))
		}
		row("  likelihood-ratio test", fmt.Sprintf("AUC %.4f; TPR %s", r.AUC, strings.Join(tprs, ", ")))
		lb := fmt.Sprintf("%s (%s, confidence %g)", privacy.FormatValue(r.EpsilonLowerBound), r.Method, r.Confidence)
		if c := r.Certified; c != nil {
			lb += fmt.Sprintf(", %.3g of the certified ε", float64(c.Ratio))
		}
		row(fmt.Sprintf("  ε lower bound (δ %g)", r.Delta), lb)
		th := r.ThresholdTest
		row("  threshold test", fmt.Sprintf("%s (at most %s at this K): TPR %.4g [%.4g, %.4g], FPR %.4g [%.4g, %.4g], direction %s",
			privacy.FormatValue(th.Epsilon), privacy.FormatValue(th.MaxDetectable), th.TPR, th.TPRInterval[0], th.TPRInterval[1], th.FPR, th.FPRInterval[0], th.FPRInterval[1], th.Direction))
		pl := r.PrivacyLossTest
		row("  privacy-loss test", fmt.Sprintf("%s: P(loss >= %s) = %.4g (lower bound %.4g), direction %s", privacy.FormatValue(pl.Epsilon), privacy.FormatValue(pl.Threshold), pl.Probability, pl.ProbabilityLower, pl.Direction))
	}
	for _, p := range rep.Plots {
		row("plot", p)
	}
	return tw.Flush()
}

// writeSetup writes the summary table of a learned attack: the model, the
// certified guarantee of one release, the corpus, then the attack's rows
// (more), and the results' table, whose header and rows table writes.
func writeSetup(w io.Writer, s Setup, more [][2]string, table func(tw io.Writer)) {
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	row := func(k, v string) { fmt.Fprintf(tw, "%s\t%s\n", k, v) }
	m, g := s.Model, s.Certified
	row("model", fmt.Sprintf("%s (%s, %s, %s): N %d components, P %d", m.Dir, m.Task, m.Variant, m.Mode, m.N, m.P))
	row("certified", fmt.Sprintf("epsilon %s at delta %g (%s) for one release of one text", privacy.FormatValue(g.Epsilon), g.Delta, g.How()))
	row("corpus", fmt.Sprintf("public %s, victims %s", s.Corpus.PublicPath, s.Corpus.VictimPath))
	for _, r := range more {
		row(r[0], r[1])
	}
	tw.Flush()
	fmt.Fprintln(w)
	tw = tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	table(tw)
	tw.Flush()
}

// WriteText writes the summary of r as `nvdp attack attribute` prints it:
// the model, its certified guarantee and the corpus, the property, the
// texts and the certified AUC, then a row per features and classifier.
func (r *AttributeReport) WriteText(w io.Writer) {
	writeSetup(w, r.Setup, [][2]string{
		{"property", r.Property.Name + ": " + r.Property.Rule},
		{"public", fmt.Sprintf("%d texts, %d with the property; releases per text %d", r.PublicTexts, r.PublicPositive, r.Options.ReleasesPerText)},
		{"victims", fmt.Sprintf("%d texts, %d with the property; one release each", r.VictimTexts, r.VictimPositive)},
		{"certified AUC", fmt.Sprintf("at most %.4f for any classifier of one release (CertifiedAUC of the certified epsilon, delta)", r.CertifiedAUC)},
	}, func(tw io.Writer) {
		conf := fmt.Sprintf("%g%% CI", 100*r.Options.Confidence)
		fmt.Fprintf(tw, "features\tclassifier\taccuracy\t%s (Clopper-Pearson)\tAUC\t%s (bootstrap)\n", conf, conf)
		for _, res := range r.Results {
			fmt.Fprintf(tw, "%s\t%s\t%.4f\t[%.4f, %.4f]\t%.4f\t[%.4f, %.4f]\n", res.Features, res.Classifier, res.Accuracy,
				res.AccuracyCI[0], res.AccuracyCI[1], res.AUC, res.AUCCI[0], res.AUCCI[1])
		}
	})
}

// WriteText writes the summary of r as `nvdp attack invert` prints it: the
// model, its certified guarantee and the corpus, the texts and tokens, a row
// per features and decoder, then the example guesses from the releases.
func (r *InvertReport) WriteText(w io.Writer) {
	writeSetup(w, r.Setup, [][2]string{
		{"public", fmt.Sprintf("%d texts, %d tokens, %d distinct (the decoders' classes); releases per text %d", r.PublicTexts, r.PublicTokens, r.Classes, r.Options.ReleasesPerText)},
		{"victims", fmt.Sprintf("%d texts, %d tokens (%.1f%% unseen in the public texts); one release each", r.VictimTexts, r.VictimTokens, 100*r.Unseen)},
	}, func(tw io.Writer) {
		conf := fmt.Sprintf("%g%% CI", 100*r.Options.Confidence)
		fmt.Fprintf(tw, "features\tdecoder\taccuracy\t%s\tprecision\trecall\tF1\t%s\tshuffled: accuracy\tF1\n", conf, conf)
		for _, res := range r.Results {
			fmt.Fprintf(tw, "%s\t%s\t%.4f\t[%.4f, %.4f]\t%.4f\t%.4f\t%.4f\t[%.4f, %.4f]\t%.4f\t%.4f\n", res.Features, res.Decoder, res.Accuracy,
				res.AccuracyCI[0], res.AccuracyCI[1], res.Precision, res.Recall, res.F1, res.F1CI[0], res.F1CI[1], res.Shuffled.Accuracy, res.Shuffled.F1)
		}
	})
	for _, res := range r.Results {
		if res.Features != FeaturesRelease {
			continue
		}
		for _, e := range res.Examples {
			fmt.Fprintf(w, "%s %s: %q -> %q\n", res.Features, res.Decoder, e.Text, e.Guess)
		}
	}
}

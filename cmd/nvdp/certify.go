package main

import (
	"math"

	"github.com/nvdp-project/nvdp/nvib"
	"github.com/nvdp-project/nvdp/option"
	"github.com/nvdp-project/nvdp/privacy"
	"github.com/nvdp-project/nvdp/task"
	"github.com/spf13/cobra"
)

// certifyFlags are the pinned flags of `nvdp certify`: the constants bound
// to a clip set, the options to the report's; the lists parsed in RunE.
type certifyFlags struct {
	model                                     string
	set                                       privacy.ClipSet
	o                                         privacy.ClipSetOptions
	orders, priorMu, priorVar, lvFloor, lvCap string
	jsonOut                                   bool
}

func newCertifyCmd() *cobra.Command {
	f := &certifyFlags{}
	cmd := &cobra.Command{
		Use:   "certify --model DIR | --components N --dims P --c-mu C --c-alpha-min A --c-alpha-max B ...",
		Short: "Certified Renyi bound of a clipping: the worst case of Eq. rdp over every pair of texts",
		Long: `Certify a clipping: the supremum of the paper's Eq. rdp over every ordered pair of posteriors
it can release, at --order and on the order grid, with its (epsilon, delta) conversion and the
certified Bayesian-DP epsilon, for any two input texts, unlike 'nvdp audit'. --model DIR
certifies a trained model with its own constants; otherwise give them. docs/privacy.md, "The
commands".`,
		Example: `  nvdp certify --components 129 --dims 128 --order 1.1 --c-mu 2 --prior-var 1 \
    --logvar-margin 0.6931 --c-alpha-min 0.3 --c-alpha-max 1 --json
  nvdp certify --model runs/sst2-clipped --witness witness.safetensors`,
		RunE: func(cmd *cobra.Command, args []string) error { return runCertify(cmd, f) },
	}
	fl := cmd.Flags()
	fl.StringVar(&f.model, "model", "", "model directory: certify its clipping with its own N, P, prior and constants")
	fl.IntVar(&f.set.Components, "components", 0, "N, components per posterior including the prior component (max-seq-len + 1)")
	fl.IntVar(&f.set.Dims, "dims", 0, "P, dimensions per component (the latent width: the hidden size unless --latent-dim)")
	fl.Float64Var(&f.o.Order, "order", privacy.DefaultOrder, "Renyi order lambda > 1 of rd_certified")
	fl.StringVar(&f.orders, "orders", "", "comma-separated Renyi orders of the certified curve (default: privacy.DefaultOrders, 1.01..1024)")
	fl.Float64Var(&f.set.CMu, "c-mu", 0, "C_mu, radius of the mean ball (>= 0)")
	fl.StringVar(&f.priorMu, "prior-mu", "0", "prior mean: a scalar or a comma list of P values")
	fl.StringVar(&f.priorVar, "prior-var", "1", "prior variance: a scalar or a comma list of P values (> 0)")
	fl.Float64Var(&f.set.LogvarMargin, "logvar-margin", nvib.DefaultLogvarMargin, "nats of variance above the floor ln((L2-1)/L2 prior_var), L2 = --clip-order (>= ln(L2/(L2-1)): fixed sigma)")
	fl.StringVar(&f.lvFloor, "logvar-floor", "", "explicit logvar floor: a scalar or a comma list of P values (with --logvar-cap, instead of --logvar-margin)")
	fl.StringVar(&f.lvCap, "logvar-cap", "", "explicit logvar cap: a scalar or a comma list of P values (with --logvar-floor)")
	fl.Float64Var(&f.set.ClipOrder, "clip-order", 0, "the Renyi order the sigma floor was derived for (default: --order)")
	fl.Float64Var(&f.set.AlphaMin, "c-alpha-min", 0, "C_amin, smallest pseudo-count of a token component (> 0 for a finite bound)")
	fl.Float64Var(&f.set.AlphaMax, "c-alpha-max", 0, "C_amax, largest pseudo-count of a token component")
	fl.Float64Var(&f.set.PriorAlpha, "prior-alpha", math.Exp(nvib.DefaultPrior().LogAlpha), "pseudo-count of the prior component (nvib.DefaultPrior: 1)")
	fl.Float64Var(&f.o.Delta, "delta", privacy.DefaultDelta, "delta of the (epsilon, delta) conversion and of the certified BDP")
	fl.IntVar(&f.o.Releases, "releases", 1, "releases of the same text (RDP adds up: the curve is k times one release)")
	fl.StringVar((*string)(&f.o.Direction), "gaussian-direction", string(privacy.DirectionStandard), "Gaussian term in the bound's own direction (standard) or as printed in Eq. rdp (paper); the supremum is the same, the witness differs")
	fl.StringVar(&f.o.Witness, "witness", "", "write the attaining pair (M = 2) as a posterior file for 'nvdp audit --posteriors'")
	fl.BoolVar(&f.jsonOut, "json", false, "print one JSON object on stdout")
	return cmd
}

// clipSet is the clip set of the constant flags, its lists parsed and
// resolved by which were given (privacy.ClipSet.Resolve: the required
// constants, the logvar range from --logvar-margin or from --logvar-floor
// and --logvar-cap).
func (f *certifyFlags) clipSet(cmd *cobra.Command) (privacy.ClipSet, error) {
	s := f.set
	for _, l := range []struct {
		flag, s string
		to      *[]float64
	}{{"prior-mu", f.priorMu, &s.PriorMu}, {"prior-var", f.priorVar, &s.PriorVar}, {"logvar-floor", f.lvFloor, &s.LogvarFloor}, {"logvar-cap", f.lvCap, &s.LogvarCap}} {
		if err := parseInto(l.to, "--"+l.flag, l.s, !cmd.Flags().Changed(l.flag), option.ParseFloats); err != nil {
			return s, err
		}
	}
	s, err := s.Resolve(givenFlags(cmd), f.o.Order)
	return s, flagError(err)
}

func runCertify(cmd *cobra.Command, f *certifyFlags) error {
	o := f.o
	o.Source = "constants given on the command line"
	if err := parseInto(&o.Orders, "--orders", f.orders, true, option.ParseFloats); err != nil {
		return err
	}
	if err := o.Validate(); err != nil {
		return flagError(err)
	}
	var set privacy.ClipSet
	var err error
	if f.model != "" {
		set, err = task.ModelClipSet(f.model, givenFlags(cmd), &o)
		err = flagError(err)
	} else {
		set, err = f.clipSet(cmd)
	}
	if err != nil {
		return err
	}
	rep, err := privacy.NewClipSetReport(set, o)
	if err != nil {
		return flagError(err)
	}
	if f.jsonOut {
		return printJSON(cmd.OutOrStdout(), rep)
	}
	return rep.WriteText(cmd.OutOrStdout())
}

package dnn

import (
	"context"
	"errors"
	"fmt"
	"math"
	"sync"

	"github.com/nvdp-project/nvdp/audit"
	"github.com/nvdp-project/nvdp/cuda"
	"github.com/nvdp-project/nvdp/privacy"
)

// The all-pairs audit on the device, as "The audit on the device" in docs/engine.md describes:
// paper Eq. rdp in principled mode for every ordered pair of a posterior file. The kernels of
// kernels/audit.cu evaluate it in FP64 with the CPU engine's formula, from audit/engine.go, and the
// host collects the values with the audit's own collection, summary and accountant,
// audit.PairAudit, so that the report is audit.Audit's up to the rounding of the values.

// AuditOptions configure the device's pass over the pairs.
type AuditOptions struct {
	// RowBlock is how many first examples a, of the unordered pairs a < b, one launch evaluates;
	// their values come down together. 0 takes as many as fill auditBlockBytes.
	RowBlock int
}

// auditBlockBytes bounds a row block's values (the device buffer and the
// host buffer they come down to).
const auditBlockBytes = 256 << 20

// auditThreads is the block size of the pair kernel (second examples b).
const auditThreads = 128

// auditMaxRows bounds a row block by the grid's y dimension.
const auditMaxRows = 65535

// AuditPairs evaluates Eq. rdp on the device for every unordered pair a < b of p at each Renyi
// order of orders, one block of rows a at a time, and calls fn with each block [a0, a1) and its
// values. It runs on the device goroutine.
//
// The bound is that of principled mode, with bo's mask and direction. The orders must be finite and
// above 1. With K = len(orders), for b in (a, M):
//
//	vals[((a-a0) M + b) 2K + 2k]     = D(a||b) at orders[k]
//	vals[((a-a0) M + b) 2K + 2k + 1] = D(b||a)
//
// A value is +Inf where the bound is undefined; the entries with b <= a are not set.
//
// The posteriors go up once: mu, logvar, alpha and the mask, as float32 and int32. The values of
// each block come down. fn runs on the calling goroutine while the device evaluates the next
// block, and vals is reused after fn returns. rowBlock 0 chooses the block size from
// auditBlockBytes.
//
// AuditPairs returns an error for invalid posteriors or orders, from the driver, for memory or
// launches, and from fn.
func AuditPairs(e *Engine, p *privacy.Posteriors, orders []float64, bo privacy.BoundOptions, rowBlock int, fn func(a0, a1 int, vals []float64) error) error {
	if err := p.Validate(); err != nil {
		return err
	}
	if len(orders) == 0 {
		return fmt.Errorf("audit on the device: no Renyi order")
	}
	for _, o := range orders {
		if !(o > 1) || math.IsInf(o, 0) {
			return fmt.Errorf("audit on the device: Renyi order lambda = %v: must be finite and > 1", o)
		}
	}
	standard := 0
	switch bo.Direction {
	case "", privacy.DirectionStandard:
		standard = 1
	case privacy.DirectionPaper:
	default:
		return fmt.Errorf("audit on the device: Gaussian direction %q: want %s or %s", bo.Direction, privacy.DirectionStandard, privacy.DirectionPaper)
	}
	M, N, P, K := p.M, p.N, p.P, len(orders)
	if int64(M)*int64(N)*int64(P) > math.MaxInt32 {
		return fmt.Errorf("audit on the device: %d x %d x %d posteriors: more than 2^31 values", M, N, P)
	}
	if M < 2 {
		return fmt.Errorf("audit on the device: %d example(s): the audit needs at least 2 examples (a pair)", M)
	}
	rowBytes := 8 * M * 2 * K
	if rowBlock <= 0 {
		rowBlock = max(1, auditBlockBytes/rowBytes)
	}
	rowBlock = min(rowBlock, M-1, auditMaxRows)

	d := e.Dev
	var bufs []cuda.Buffer
	defer func() {
		for _, b := range bufs {
			d.Free(b)
		}
	}()
	alloc := func(bytes int) (cuda.Buffer, error) {
		b, err := d.Alloc(max(bytes, 8))
		if err == nil {
			bufs = append(bufs, b)
		}
		return b, err
	}
	mnp, mn := M*N*P, M*N
	muT, err := alloc(4 * mnp)
	if err != nil {
		return fmt.Errorf("audit on the device: mu: %w", err)
	}
	s2T, err := alloc(8 * mnp)
	if err != nil {
		return fmt.Errorf("audit on the device: sigma^2: %w", err)
	}
	comp := make([]cuda.Buffer, 4) // alpha, lnGamma(alpha), ls (double), keep (int32), [N, M]
	for i := range comp {
		if comp[i], err = alloc(8 * mn); err != nil {
			return fmt.Errorf("audit on the device: per-component sums: %w", err)
		}
	}
	tot, err := alloc(8 * M)
	if err != nil {
		return err
	}
	lgT, err := alloc(8 * M)
	if err != nil {
		return err
	}
	ord, err := alloc(8 * K)
	if err != nil {
		return err
	}
	if err := cuda.Upload(d, ord, orders); err != nil {
		return err
	}
	if err := e.auditPrep(p, bo.UseMask, muT, s2T, comp, tot, lgT); err != nil {
		return err
	}
	out, err := alloc(rowBlock * rowBytes)
	if err != nil {
		return fmt.Errorf("audit on the device: values of %d rows: %w", rowBlock, err)
	}
	host := make([]float64, rowBlock*M*2*K)
	launch := func(a0, a1 int) error {
		// b over (a0, M): the blocks of a row a > a0 below a+1 return at once
		return e.auditLaunch("audit_pairs", cuda.Dim3{X: (M - a0 - 1 + auditThreads - 1) / auditThreads, Y: a1 - a0, Z: K}, cuda.Threads(auditThreads),
			out, muT, s2T, comp[0], comp[1], comp[2], comp[3], tot, lgT, ord, M, N, P, K, a0, standard)
	}
	// The last first example with a partner is M-2.
	next := func(a0 int) int { return min(a0+rowBlock, M-1) }
	if err := launch(0, next(0)); err != nil {
		return err
	}
	for a0 := 0; a0 < M-1; a0 = next(a0) {
		a1 := next(a0)
		vals := host[:(a1-a0)*M*2*K]
		if err := cuda.Download(d, vals, out); err != nil { // waits for the block's launch
			return err
		}
		if a1 < M-1 {
			if err := launch(a1, next(a1)); err != nil {
				return err
			}
		}
		if err := fn(a0, a1, vals); err != nil {
			return err
		}
	}
	return nil
}

// auditPrep uploads p (mu, logvar, alpha, the mask) and computes the
// transposed mu and sigma^2 [N P, M], the per-component alpha,
// lnGamma(alpha), half the sum of the logvars and whether the component is
// kept [N, M] (comp), and the per-example totals of the kept alphas with
// their lnGamma [M]. The float32 copies are freed before it returns.
func (e *Engine) auditPrep(p *privacy.Posteriors, useMask bool, muT, s2T cuda.Buffer, comp []cuda.Buffer, tot, lgT cuda.Buffer) error {
	d := e.Dev
	M, N, P := p.M, p.N, p.P
	mnp, mn := M*N*P, M*N
	var tmp []cuda.Buffer
	defer func() {
		for _, b := range tmp {
			d.Free(b)
		}
	}()
	up := func(bytes int) (cuda.Buffer, error) {
		b, err := d.Alloc(max(bytes, 8))
		if err == nil {
			tmp = append(tmp, b)
		}
		return b, err
	}
	mu, err := up(4 * mnp)
	if err != nil {
		return fmt.Errorf("audit on the device: uploading mu: %w", err)
	}
	lv, err := up(4 * mnp)
	if err != nil {
		return fmt.Errorf("audit on the device: uploading logvar: %w", err)
	}
	al, err := up(4 * mn)
	if err != nil {
		return err
	}
	mask, err := up(4 * mn)
	if err != nil {
		return err
	}
	for _, c := range []struct {
		dst cuda.Buffer
		src []float32
	}{{mu, p.Mu}, {lv, p.Logvar}, {al, p.Alpha}} {
		if err := cuda.Upload(d, c.dst, c.src); err != nil {
			return err
		}
	}
	useMaskArg := 0
	if useMask && p.AttentionMask != nil {
		m := make([]int32, mn)
		for i, v := range p.AttentionMask {
			m[i] = int32(v)
		}
		if err := cuda.Upload(d, mask, m); err != nil {
			return err
		}
		useMaskArg = 1
	}
	if err := e.auditLaunch("audit_prep_dims", cuda.Blocks(mnp, threads), cuda.Threads(threads), muT, s2T, mu, lv, M, N*P); err != nil {
		return err
	}
	if err := e.auditLaunch("audit_prep_comps", cuda.Blocks(mn, threads), cuda.Threads(threads),
		comp[0], comp[1], comp[2], comp[3], al, lv, mask, useMaskArg, M, N, P); err != nil {
		return err
	}
	if err := e.auditLaunch("audit_prep_totals", cuda.Blocks(M, threads), cuda.Threads(threads), tot, lgT, comp[0], comp[3], M, N); err != nil {
		return err
	}
	return d.Sync() // the float32 copies are freed on return
}

// auditLaunch is launch returning the error instead of panicking (the
// audit is not a step of a layer: it reports its errors).
func (e *Engine) auditLaunch(name string, grid, block cuda.Dim3, args ...any) error {
	k, ok := e.kernels[name]
	if !ok {
		var err error
		if k, err = e.mod.Kernel(e.Dev, name); err != nil {
			return err
		}
		e.kernels[name] = k
	}
	return e.Dev.Launch(k, grid, block, 0, args...)
}

// ErrAuditUnsupported marks the audits the device does not run, as [AuditUnsupported] reports
// them; audit.Audit on the CPU runs them.
var ErrAuditUnsupported = errors.New("runs on the CPU only")

// AuditUnsupported says why the device does not run the audit of p with opt, or returns nil when
// [AuditAllPairs] runs it. The device does not run reference mode, a pair sample (Pairs), the CPU
// engine's LowMemory, or more than 2^31 values of mu, since the kernels index with int32.
//
// The error wraps [ErrAuditUnsupported] and names the option. AuditUnsupported does not validate
// the options or the posteriors; AuditAllPairs does. It runs on the host only, with no device
// call.
func AuditUnsupported(p *privacy.Posteriors, opt audit.Options) error {
	switch {
	case opt.Mode == privacy.ModeReference:
		return fmt.Errorf("audit on the device: the reference mode %w", ErrAuditUnsupported)
	case opt.Pairs != 0:
		return fmt.Errorf("audit on the device: a pair sample (Pairs %d) %w: the device audits every pair", opt.Pairs, ErrAuditUnsupported)
	case opt.LowMemory:
		return fmt.Errorf("audit on the device: LowMemory applies to the CPU engine (the device holds the posteriors; the host no float64 copy): it %w", ErrAuditUnsupported)
	case p != nil && int64(p.M)*int64(p.N)*int64(p.P) > math.MaxInt32:
		return fmt.Errorf("audit on the device: %d x %d x %d posteriors: more than 2^31 values %w", p.M, p.N, p.P, ErrAuditUnsupported)
	}
	return nil
}

// AuditOnDevice runs [AuditAllPairs] of p under opt on d, with an engine of its own for the audit,
// freed after it. It may be called from any goroutine. `nvdp audit --device` and the pipeline's
// audit, train.AuditRelease, run it. Its errors are AuditAllPairs's.
func AuditOnDevice(ctx context.Context, d *cuda.Device, p *privacy.Posteriors, opt audit.Options) (*audit.Report, error) {
	var r *audit.Report
	err := d.Do(func() error {
		e, err := NewEngine(d)
		if err != nil {
			return err
		}
		defer e.Close()
		r, err = AuditAllPairs(ctx, e, p, opt, AuditOptions{})
		return err
	})
	return r, err
}

// AuditAllPairs is audit.Audit in principled mode over every ordered pair, with the bounds
// evaluated on the device by [AuditPairs]. It runs on the device goroutine.
//
// The report is audit.Audit's up to the rounding of the values, which the device computes in FP64
// with the CPU engine's formula: the same fields, counts, undefined pairs, argmax and its tie rule,
// quantiles, histogram and BDP accountant. The host collects each row block's values with
// opt.Workers goroutines, GOMAXPROCS when 0, giving row a to worker a mod workers, while the
// device evaluates the next block.
//
// AuditAllPairs returns an error wrapping [ErrAuditUnsupported] for the options the device does
// not run, see [AuditUnsupported], for which audit.Audit is the way; for the options audit.Audit
// refuses; on cancellation; and from the driver.
func AuditAllPairs(ctx context.Context, e *Engine, p *privacy.Posteriors, opt audit.Options, ao AuditOptions) (*audit.Report, error) {
	if err := AuditUnsupported(p, opt); err != nil {
		return nil, err
	}
	pa, err := audit.NewPairAudit(p, opt)
	if err != nil {
		return nil, err
	}
	orders, W, M := pa.Orders(), pa.Workers(), p.M
	w2 := 2 * len(orders)
	err = AuditPairs(e, p, orders, pa.BoundOptions(), ao.RowBlock, func(a0, a1 int, vals []float64) error {
		if err := ctx.Err(); err != nil {
			return err
		}
		var wg sync.WaitGroup
		for w := range W {
			wg.Go(func() {
				for a := a0 + ((w-a0)%W+W)%W; a < a1; a += W {
					row := vals[(a-a0)*M*w2:]
					for b := a + 1; b < M; b++ {
						pa.Add(w, a, b, row[b*w2:(b+1)*w2])
					}
				}
			})
		}
		wg.Wait()
		// the ordered pairs of the unordered a < b with a in [a0, a1)
		pa.Done(int64(a1-a0) * int64(2*M-a0-a1-1))
		return ctx.Err()
	})
	if err != nil {
		return nil, err
	}
	return pa.Report()
}

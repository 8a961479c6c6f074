// Package noise draws the release noise of nvdp exactly (docs/privacy.md,
// "Floating-point safety"): a standard normal deviate sampled by Karney's
// exact algorithm (Karney, "Sampling exactly from the normal distribution",
// ACM TOMS 42(1), 2016, Algorithm N, with the improvement of Du, Fan & Wei,
// Computational Statistics 37, 2022: the integer part k drawn with
// probability proportional to exp(-k^2/2), here in one step against the
// exact expansions of its cumulative probabilities) and rounded correctly to a lattice
// of spacing G = 2^Exp, so that a released coordinate is
//
//	z = G (m + n),   m = the mean rounded toward the clip ball's centre (MeanIndex),
//	                 n = round(sigma' X / G), X ~ N(0, 1) exactly (Sampler.Noise),
//
// an integer multiple of G, computed from random bits with integer
// operations only (comparisons of lazily drawn uniform deviates, 128-bit
// integer rounding); the one floating-point step is the deterministic
// conversion of the integer m + n to the float32 G (m + n), exact while
// |m + n| < 2^24 (Lattice.Value).
//
// Why this is the certified mechanism: G m lies in the clip ball (rounding
// toward the centre shortens every coordinate's offset), and
// G (m + n) = round_G(G m + sigma' X) is a deterministic function
// (post-processing) of the continuous Gaussian mechanism G m + sigma' X with
// sigma' >= sigma, the certified noise (sigma' is sigma rounded up to a
// float32: NoiseSigma). N(0, sigma'^2) is N(0, sigma^2) plus independent
// noise, itself post-processing. So every certificate proved for the
// continuous Gaussian mechanism over the clip ball holds unchanged for the
// released bits, with no added sensitivity, and every lattice point has
// positive probability under every input.
//
// The time a draw takes depends on the noise it draws (rejection sampling),
// so the noise of a release is drawn ahead of the request that uses it
// (Pool), and adding it to the mean (Lattice.Value) takes the same
// operations for every value.
package noise

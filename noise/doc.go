// Package noise draws the release noise of nvdp exactly, as "Floating-point safety" in
// docs/privacy.md describes: a standard normal deviate sampled exactly and rounded correctly to a
// lattice of spacing G = 2^Exp. A released coordinate is
//
//	z = G (m + n),  m = MeanIndex(mu),  n = round(sigma' X / G),  X ~ N(0, 1)
//
// where m is the mean rounded toward the clip ball's centre by [Lattice.MeanIndex], and X is drawn
// exactly by [Noise]. z is an integer multiple of G, computed from random bits with integer
// operations only: comparisons of lazily drawn uniform deviates and random integers with exact
// constants, and 128-bit integer rounding. The one floating-point step is the deterministic
// conversion of the integer m + n to the float32 G (m + n) by [Lattice.Value], exact while |m +
// n| < 2^24.
//
// The sampler (cells.go) is rejection from a staircase envelope of cells 1/64 wide: the cell is
// drawn with probability proportional to the density at its left end, a uniform deviate against
// the exact binary expansions of the cells' cumulative probabilities (computed once in integer
// interval arithmetic); a point of the cell is kept with probability exp(-c w) exp(-(w/64)^2/2),
// by Karney's Algorithms E and B ("Sampling exactly from the normal distribution", ACM TOMS
// 42(1), 2016) run on scaled deviates. About 99.4% of the points are kept, and most draws are
// decided by one 16-bit digit and 31 bits, so that it takes about half the time of Karney's
// Algorithm N (with the step of Du, Fan and Wei, Computational Statistics 37, 2022), which it
// replaced: docs/performance.md, "The cell sampler".
//
// This is the certified mechanism. G m lies in the clip ball, since rounding toward the centre
// shortens every coordinate's offset. G (m + n) = round_G(G m + sigma' X) is a deterministic
// function, a post-processing, of the continuous Gaussian mechanism G m + sigma' X with
// sigma' >= sigma, the certified noise: sigma' is sigma rounded up to a float32 by [NoiseSigma].
// N(0, sigma'^2) is N(0, sigma^2) plus independent noise, itself a post-processing. So every
// certificate proved for the continuous Gaussian mechanism over the clip ball holds unchanged for
// the released bits, with no added sensitivity, and every lattice point has positive probability
// under every input.
//
// The draw is written twice: step by step, one method per step (cell, trial, expRuns, normRun,
// round), and as one function for [Noise.Fill] and [Noise.Draw] that keeps the random bits in
// local variables and decides the cell and the trial in line, calling the methods only on the
// rare paths. Both ask for the same bits in the same order, so they return the same values from
// the same source and advance it by as many Uint64 calls (TestDrawReference), and the values are
// pinned bit for bit (TestNoiseGolden). A *rand.ChaCha8 or *rand.Rand source is called directly,
// any other through the interface. About 30-40 ns of CPU time a value on one core of a 2-core
// AMD EPYC (go test -run '^$' -bench 'Noise$' ./noise: cpu-ns/value), against 65-75 for
// Algorithm N on the same machine.
//
// The time a draw takes depends on the noise it draws, since the sampler rejects. The noise of a
// release is therefore drawn ahead of the request that uses it, by a pool, and adding it to the
// mean with Lattice.Value takes the same operations for every value.
package noise

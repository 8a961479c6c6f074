// Package audit is the empirical side of privacy: the paper's Eq. rdp
// (privacy.PairBound) over all ordered pairs of a file of posteriors
// (principled mode; Audit, or a sample of the pairs), the Bayesian
// differential privacy accountant of Triastcyn & Faltings (2020) as an
// estimate, and the released code's batch-wise computation (reference mode,
// ref §6-§7). A long audit runs in shards (AuditShard -> Part, Merge).
// Its numbers are labelled empirical (EmpiricalOf): the maximum over the
// pairs of one file, not a bound for other inputs; the guarantee is
// package privacy's certificate.
//
// All arithmetic is float64; posteriors are stored as float32 (the training
// engine's precision). See docs/privacy.md for the derivations and every
// difference between the principled and reference modes.
package audit

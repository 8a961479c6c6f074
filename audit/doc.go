// Package audit is the empirical side of privacy. In principled mode,
// [Audit] evaluates the paper's Eq. rdp, [privacy.PairBound], over all
// ordered pairs of a file of posteriors or a sample of them, with the
// Bayesian differential privacy accountant of Triastcyn and Faltings 2020 as
// an estimate. In reference mode it runs the released code's batch-wise
// computation, ref §6-§7. A long audit runs in shards: [AuditShard] makes a
// [Part] and [Merge] combines them.
//
// [AuditFile] audits a posterior file as `nvdp audit` does: it maps the
// file, certifies the clip set of its metadata, and runs the audit on the
// CPU or on a [Device]; [AuditFileShard] and [MergeFiles] are its sharded
// form, and a [FileReport] prints the result as text or JSON.
//
// Its numbers are labelled empirical, see [EmpiricalOf]: the maximum over
// the pairs of one file, not a bound for other inputs. The guarantee is
// package privacy's certificate.
//
// All arithmetic is float64; posteriors are stored as float32, the training
// engine's precision. See docs/privacy.md for the derivations and every
// difference between the principled and reference modes.
package audit

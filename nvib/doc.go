// Package nvib implements the nonparametric variational information
// bottleneck (NVIB) of NVDP on the nn engine: the NVIB layer (posterior
// projections, prior component, principled clipping), sampling (Gaussian
// reparameterisation; Dirichlet weights from Gamma samples with implicit
// reparameterisation gradients), the KL regularisers L_G and L_D, denoising
// attention, the NVDP Transformer block, classification/regression heads,
// the baseline / nvdp / nvdp-clipped / gaussian models and the export of posteriors
// for the privacy audit.
//
// Two modes run through the package (privacy.Mode, the one type of the
// module): privacy.ModePrincipled (default; the paper's equations with the
// quirks of the released code fixed) and privacy.ModeReference (the released
// code, quirk for quirk; ref §10). Every difference is listed in
// docs/model.md.
//
// Conventions: tensors are float32 row-major; B = batch, S = padded sequence
// length, n = number of real tokens, N = S + 1 latent components (index 0 is
// the prior component), H = the encoder's hidden size (the width of x), P =
// the latent width of the release (Config.Latent: H unless
// Config.LatentDim is set), d_h = P/heads (the NVDP block's attention
// heads). Masks are
// 1 = real, 0 = padding (Hugging Face's attention_mask, and the posterior
// file's; the opposite of the reference's pad mask m).
// Scalar special-function work (KL, Gamma gradients) is done in float64.
package nvib

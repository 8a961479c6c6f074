// Package nvib implements the nonparametric variational information
// bottleneck, NVIB, of NVDP on the nn engine.
//
// It holds the NVIB layer with its posterior projections, prior component
// and principled clipping; sampling, with Gaussian reparameterisation and
// Dirichlet weights from Gamma samples with implicit reparameterisation
// gradients; the KL regularisers L_G and L_D; denoising attention and the
// NVDP Transformer block; classification and regression heads; the
// baseline, nvdp, nvdp-clipped and gaussian models; and the export of
// posteriors for the privacy audit.
//
// Two modes, values of [privacy.Mode], run through the package.
// [privacy.ModePrincipled], the default, follows the paper's equations with
// the quirks of the released code fixed. [privacy.ModeReference] follows the
// released code quirk for quirk, as listed in ref §10. docs/model.md lists
// every difference.
//
// Tensors are float32 and row-major. B is the batch size, S the padded
// sequence length, n the number of real tokens, and N = S + 1 the number of
// latent components, index 0 being the prior component. H is the encoder's
// hidden size, the width of x; P is the latent width of the release,
// [Config.Latent], which is H unless [Config.LatentDim] is set; d_h is P
// divided by the number of attention heads of the NVDP block. Masks hold 1
// for a real token and 0 for padding, as Hugging Face's attention_mask and
// the posterior file do; the reference's pad mask m is the opposite. Scalar
// special-function work, in the KL and the Gamma gradients, is done in
// float64.
package nvib

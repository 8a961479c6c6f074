package privacy

// Mode is the one switch between the two behaviours that run through the
// module: the paper's equations with the released code's quirks fixed, which
// is [ModePrincipled] and the default, and the released code quirk for
// quirk, which is [ModeReference], as ref §1-§10 describe it.
//
// The same Mode selects the model and its clipping, in package nvib, and the
// audit, in package audit: `nvdp run` audits in the model's mode unless told
// otherwise. docs/model.md and docs/privacy.md list every difference. The
// empty Mode means ModePrincipled.
type Mode string

const (
	// ModePrincipled follows the paper's equations with the documented fixes.
	ModePrincipled Mode = "principled"
	// ModeReference reproduces the released code.
	ModeReference Mode = "reference"
)

// Valid reports whether m names a mode; "" counts as principled.
func (m Mode) Valid() bool { return m == "" || m == ModePrincipled || m == ModeReference }

// IsReference reports whether m is the reference mode.
func (m Mode) IsReference() bool { return m == ModeReference }

// OrDefault returns m, or ModePrincipled for the empty Mode.
func (m Mode) OrDefault() Mode {
	if m == "" {
		return ModePrincipled
	}
	return m
}

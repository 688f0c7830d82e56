package consumer

import "github.com/rmqguard/rmqguard/internal/causelabel"

// knownDuplicateCause reports whether c is one of the duplicate causes the chain can determine
// (redelivery, resend, replay).
func knownDuplicateCause(c string) bool {
	return c == causelabel.Redelivery || c == causelabel.Resend || c == causelabel.Replay
}

// letterClass returns c when it is one of the dead-letter reason classes, else "other".
func letterClass(c string) string {
	switch c {
	case causelabel.Permanent, causelabel.Unidentifiable, causelabel.VersionGap, causelabel.Exhausted,
		causelabel.Panic, causelabel.Timeout, causelabel.LeaseHeld:
		return c
	}
	return causelabel.Other
}

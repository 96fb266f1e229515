package clock

import "golang.org/x/sys/unix"

// kernelSynced asks the kernel (adjtimex with no modes: a read) whether an
// NTP daemon has marked the clock synchronized.
func kernelSynced() (synced, ok bool) {
	var tx unix.Timex
	state, err := unix.Adjtimex(&tx)
	if err != nil { // EPERM under ProtectClock= or a seccomp filter
		return false, false
	}
	return state != unix.TIME_ERROR && tx.Status&unix.STA_UNSYNC == 0, true
}

package app

import (
	"errors"
	"fmt"
	"net"
	"net/netip"
	"syscall"
)

// explainListen adds what an operator needs to a listener that could not be
// bound (docs/design.md#cli): which address, who usually holds it and how to find out,
// or which privilege is missing. Other errors pass through unchanged.
func explainListen(err error) error {
	var oe *net.OpError
	if err == nil || !errors.As(err, &oe) || oe.Addr == nil {
		return err
	}
	ap, perr := netip.ParseAddrPort(oe.Addr.String())
	if perr != nil {
		return err
	}
	switch {
	case errors.Is(err, syscall.EADDRINUSE):
		return fmt.Errorf("%w: %s is taken by another program: %s; find it with `ss -lntup 'sport = :%d'`, "+
			"then stop it or give nxdns another address (dns.listen, or nxdns run --listen)",
			err, ap, usualHolders(ap.Port()), ap.Port())
	case errors.Is(err, syscall.EACCES) && ap.Port() < 1024:
		return fmt.Errorf("%w: port %d is privileged: run as root, or grant CAP_NET_BIND_SERVICE "+
			"(the packaged systemd unit does), or listen on a port above 1023", err, ap.Port())
	case errors.Is(err, syscall.EADDRNOTAVAIL):
		return fmt.Errorf("%w: %s is not an address of this host (see `ip addr`)", err, ap.Addr())
	}
	return err
}

// usualHolders names the programs that hold port on a typical Linux host,
// most likely first.
func usualHolders(port uint16) string {
	switch port {
	case 53:
		return "usually systemd-resolved's stub listener (DNSStubListener=no in /etc/systemd/resolved.conf frees it), " +
			"or another DNS server (dnsmasq, Pi-hole, unbound, bind)"
	case 5353:
		return "usually avahi-daemon (mDNS), which holds 5353 on most Linux machines; nxdns's own default is 5300"
	}
	return "usually another DNS server (dnsmasq, unbound, a second nxdns); systemd-resolved holds 53 and avahi 5353"
}

package server

import (
	"crypto/hkdf"
	"crypto/rand"
	"crypto/sha256"
	"errors"
	"fmt"
	"io/fs"
	"net"
	"path/filepath"

	"github.com/quic-go/quic-go"
	"go.uber.org/zap"

	"github.com/nxdns/nxdns/internal/safefile"
)

// Stateless resets on the QUIC listeners (RFC 9000 §10.3; docs/server.md
// "Stateless resets after a restart"). A QUIC connection outlives nothing
// of the process that served it: after nxdns restarts, a client's next
// packet on a connection to the old process reaches a listener with no
// state for it. Without a stateless-reset key quic-go drops that packet
// and the client learns of the loss only by its own idle or PTO timeout,
// so its DNS stalls for seconds. With a key, the new process answers the
// packet with a stateless reset whose token the old one had given the
// client for that connection ID; the client recognises it, ends the
// connection at once and dials again. That works only if the key survives
// the restart, so it is kept in filter.state_dir.

// QUICResetKeyFile is the file under filter.state_dir that keeps the
// secret the QUIC listeners' stateless-reset keys are derived from: 32
// random bytes, mode 0600. It is a secret (whoever holds it can end any
// client's DoQ or DoH3 connection with a forged reset): never logged, nor
// in the metrics or the API.
const QUICResetKeyFile = "quic-reset-key"

// QUICResetSecret is the content of QUICResetKeyFile.
type QUICResetSecret [32]byte

// LoadQUICResetSecret returns the secret kept in dir's QUICResetKeyFile,
// creating the file (crypto/rand, mode 0600, written atomically) on first
// use. A file that cannot be read or is not 32 bytes long is replaced by a
// fresh secret, with one error line naming the file and what was wrong: the
// only loss is that connections to the process before this one end by
// their idle timeout, as they do without a key. nil (no stateless resets,
// as without a state directory) when dir is "" or a fresh secret cannot be
// written: a secret that would not survive the next restart could reset
// nothing a client holds.
func LoadQUICResetSecret(dir string, log *zap.Logger) *QUICResetSecret {
	if dir == "" {
		return nil
	}
	if log == nil {
		log = zap.NewNop()
	}
	path := filepath.Join(dir, QUICResetKeyFile)
	var sec QUICResetSecret
	b, err := safefile.ReadFile(path, 2*int64(len(sec))) // a larger file is as wrong as any other size
	const lost = "; writing a new key (connections from before this start end by their idle timeout)"
	switch {
	case err == nil && len(b) == len(sec):
		copy(sec[:], b)
		return &sec
	case err == nil, errors.Is(err, safefile.ErrTooLarge):
		size := fmt.Sprintf("%d bytes", len(b))
		if err != nil {
			size = fmt.Sprintf("over %d bytes", 2*len(sec))
		}
		log.Error("QUIC stateless-reset key file is the wrong size"+lost,
			zap.String("file", path), zap.String("problem", fmt.Sprintf("%s, want %d", size, len(sec))))
	case !errors.Is(err, fs.ErrNotExist):
		log.Error("QUIC stateless-reset key file is unreadable"+lost, zap.String("file", path), zap.Error(err))
	}
	rand.Read(sec[:]) // never returns an error (crypto/rand)
	if err := safefile.WriteFile(path, sec[:], 0o600); err != nil {
		log.Error("QUIC stateless-reset key not kept: the DoQ and DoH3 listeners send no stateless resets",
			zap.String("file", path), zap.Error(err))
		return nil
	}
	return &sec
}

// quicResetKey is the stateless-reset key of the transport bound at addr
// for the front named front ("DoQ", "DoH3"), derived from sec with HKDF
// (RFC 5869); nil when sec is.
//
// Why each transport has its own key (RFC 9000 §10.3.2, §21.11): a token
// is a function of the key and the connection ID alone, and quic-go
// answers a short-header packet whose connection ID it has no state for
// with that ID's token. Were the DoQ and the DoH3 listeners (or two
// addresses) to share a key, anyone could send a live DoQ connection's ID,
// seen on the wire, to the DoH3 port, be handed its token, and end that
// connection with a forged reset. Derived from the front and the bound
// address, the key is the same for the same listener after a restart
// (which is the point: the old process's connections there are gone) and
// different for every other listener.
//
// No amplification or loop through it (RFC 9000 §10.3, §10.3.3: a reset
// must not be three times the size of its trigger, and must be smaller
// than it so two endpoints cannot bounce resets for ever): quic-go answers
// only short-header packets of more than 42 octets, each with a reset of
// exactly 42, and checks every incoming packet for one of its own tokens
// before it would answer it, so a reset, which is never above 42 octets
// from quic-go, is never answered by another.
func quicResetKey(sec *QUICResetSecret, front string, addr net.Addr) *quic.StatelessResetKey {
	if sec == nil {
		return nil
	}
	k, err := hkdf.Key(sha256.New, sec[:], nil, "nxdns QUIC stateless reset\x00"+front+"\x00"+addr.String(), len(quic.StatelessResetKey{}))
	if err != nil {
		panic(err) // only for a length past 255 hashes
	}
	return (*quic.StatelessResetKey)(k)
}

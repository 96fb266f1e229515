package app

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"strings"

	"github.com/nxdns/nxdns/internal/config"
	"github.com/nxdns/nxdns/internal/filter"
	"github.com/nxdns/nxdns/internal/tlscert"
)

// Preflight reports what nxdns would reject or ignore when it applies a
// valid configuration (issue 30 finding 3: `nxdns check` said ok and the
// reload then failed, or the rule did nothing):
//
//   - each filter.block and filter.allow entry must give a rule: one that
//     does not is skipped with a warning, so the rule the operator wrote does
//     nothing. The reason is the list parser's. Always checked: it reads no
//     file.
//
// With files, it also reads what the configuration names, as the daemon
// does on a reload — on the machine that runs nxdns, not at a system build,
// where a credential or an ACME certificate does not exist yet:
//
//   - web.password_file must hold a bcrypt hash: a reload without one is
//     rejected (at start the dashboard is locked instead);
//   - tls.cert_file and tls.key_file must load as a pair: a reload with a
//     bad pair is rejected (and a start fails).
//
// `nxdns check` reports every one as a problem, so the .deb unit's
// ExecReload, `nxdns check --files` before the signal, fails and nothing is
// sent. Preflight only reads; it binds and starts nothing.
func Preflight(cfg config.Config, files bool) config.Problems {
	var ps config.Problems
	add := func(path string, code config.Code, format string, args ...any) {
		ps = append(ps, config.Problem{Path: path, Code: code, Message: fmt.Sprintf(format, args...)})
	}
	for _, rules := range []struct {
		key   string
		lines []string
	}{{"filter.block", cfg.Filter.Block}, {"filter.allow", cfg.Filter.Allow}} {
		for i, line := range rules.lines {
			if why := filter.ParseLine(line, func(filter.Rule) {}).Problem(); why != "" {
				add(fmt.Sprintf("%s[%d]", rules.key, i), config.CodeInvalidRule, "%q is not taken: %s", line, why)
			}
		}
	}
	if !files {
		return ps
	}
	if _, err := loadWebPassword(cfg.Web); err != nil {
		add("web.password_file", config.CodePasswordFile, "%s%s", strings.TrimPrefix(err.Error(), "web.password_file: "), permissionHint(err))
	}
	if cfg.TLS.CertFile != "" && cfg.TLS.KeyFile != "" {
		if _, err := tlscert.Open(cfg.TLS.CertFile, cfg.TLS.KeyFile, tlscert.Options{}); err != nil {
			add("tls.cert_file", config.CodeCertificate, "%v%s", err, permissionHint(err))
		}
	}
	return ps
}

// permissionHint is what a "permission denied" adds: the daemon runs as
// its own user, not as whoever ran check. The .deb's unit runs it as a
// dynamic user in the group nxdns (packaging/nxdns.service), so a file
// for it is readable by that group; `nxdns check --files` run as the
// service user (as ExecReload does) says so before a reload fails.
func permissionHint(err error) string {
	if !errors.Is(err, fs.ErrPermission) {
		return ""
	}
	return fmt.Sprintf(" (nxdns cannot read it as user %d: the .deb's service runs in group nxdns, so `chgrp nxdns FILE && chmod 640 FILE`; on NixOS use the module's passwordFile, a credential)", os.Geteuid())
}

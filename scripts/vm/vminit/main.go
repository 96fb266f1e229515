// Command vminit is the /init of the small initramfs that boots the arm64
// root filesystem of the systemd VM test (scripts/vm/rootfs.sh,
// docs/testing-vm.md). The Debian arm64 kernel has virtio and ext4 as
// modules, and a root filesystem debootstrapped for another architecture
// has no initramfs (nor anything to make one with) until its second stage
// has run, which needs an arm64 machine: this program is that initramfs, a
// static binary built for the guest. It loads the modules the root disk
// needs (their dependencies read from each module's .modinfo), mounts
// /dev/vda, and then either runs debootstrap's second stage there and
// powers off (vminit.stage=second on the kernel command line) or hands over
// to the root filesystem's /sbin/init, systemd.
package main

import (
	"bytes"
	"debug/elf"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"syscall"
	"time"

	"golang.org/x/sys/unix"
)

// rootModules are what the root disk needs: crc32c (ext4 asks the crypto
// API for it, and there is no modprobe here to load it then), its virtio
// transport (mmio or
// PCI), the block driver and the file system.
var rootModules = []string{"crc32c_generic", "virtio_mmio", "virtio_pci", "virtio_blk", "ext4"}

func main() {
	if os.Getpid() != 1 {
		// On the host: vminit -pack OUT INIT MODDIR writes the initramfs
		// (newc cpio): INIT (this program built for the guest) as /init and
		// the modules rootModules need from MODDIR (/lib/modules/RELEASE).
		if len(os.Args) != 5 || os.Args[1] != "-pack" {
			fmt.Fprintln(os.Stderr, "usage: vminit -pack OUT INIT MODDIR")
			os.Exit(2)
		}
		if err := pack(os.Args[2], os.Args[3], os.Args[4]); err != nil {
			fmt.Fprintln(os.Stderr, "vminit:", err)
			os.Exit(1)
		}
		return
	}
	if err := run(); err != nil {
		fmt.Fprintln(os.Stderr, "vminit:", err)
	}
	// PID 1 must not exit; power off (the host sees qemu end).
	unix.Sync()
	_ = unix.Reboot(unix.LINUX_REBOOT_CMD_POWER_OFF)
}

func run() error {
	for _, m := range []struct{ src, dst, typ string }{
		{"proc", "/proc", "proc"}, {"sysfs", "/sys", "sysfs"}, {"devtmpfs", "/dev", "devtmpfs"},
	} {
		_ = os.MkdirAll(m.dst, 0o755)
		if err := unix.Mount(m.src, m.dst, m.typ, 0, ""); err != nil {
			return fmt.Errorf("mount %s: %w", m.dst, err)
		}
	}
	var rel unix.Utsname
	_ = unix.Uname(&rel)
	release := unix.ByteSliceToString(rel.Release[:])
	mods, err := index("/lib/modules/" + release)
	if err != nil {
		return err
	}
	loaded := map[string]bool{}
	for _, m := range rootModules {
		if err := load(mods, loaded, m, finit); err != nil {
			return err
		}
	}
	deadline := time.Now().Add(60 * time.Second)
	for {
		if _, err := os.Stat("/dev/vda"); err == nil {
			break
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("no /dev/vda after 60 s")
		}
		time.Sleep(100 * time.Millisecond)
	}
	_ = os.MkdirAll("/newroot", 0o755)
	if err := unix.Mount("/dev/vda", "/newroot", "ext4", 0, ""); err != nil {
		return fmt.Errorf("mount /dev/vda: %w", err)
	}
	cmdline, _ := os.ReadFile("/proc/cmdline")
	if bytes.Contains(cmdline, []byte("vminit.stage=second")) {
		// debootstrap's second stage, then the recipe's own steps
		// (/vminit-post.sh, written by rootfs.sh), in the root filesystem.
		if err := unix.Mount("/dev", "/newroot/dev", "", unix.MS_BIND, ""); err != nil {
			return fmt.Errorf("bind /dev: %w", err)
		}
		c := exec.Command("/bin/sh", "-c", "/debootstrap/debootstrap --second-stage && if [ -f /vminit-post.sh ]; then sh /vminit-post.sh && rm -f /vminit-post.sh; fi && touch /.second-stage-ok")
		c.Stdout, c.Stderr = os.Stdout, os.Stderr
		c.Env = []string{"PATH=/usr/sbin:/usr/bin:/sbin:/bin", "HOME=/root", "LANG=C.UTF-8"}
		c.SysProcAttr = &syscall.SysProcAttr{Chroot: "/newroot"}
		c.Dir = "/"
		err := c.Run()
		unix.Sync()
		_ = unix.Unmount("/newroot/dev", 0)
		_ = unix.Unmount("/newroot", 0)
		return err
	}
	// Hand over: the root filesystem becomes / and systemd runs as PID 1.
	for _, d := range []string{"/proc", "/sys", "/dev"} {
		if err := unix.Mount(d, "/newroot"+d, "", unix.MS_MOVE, ""); err != nil {
			return fmt.Errorf("move %s: %w", d, err)
		}
	}
	if err := os.Chdir("/newroot"); err != nil {
		return err
	}
	if err := unix.Mount(".", "/", "", unix.MS_MOVE, ""); err != nil {
		return fmt.Errorf("move root: %w", err)
	}
	if err := unix.Chroot("."); err != nil {
		return err
	}
	_ = os.Chdir("/")
	return unix.Exec("/sbin/init", []string{"/sbin/init"}, os.Environ())
}

// index maps each module's name (dashes as underscores) to its file.
func index(dir string) (map[string]string, error) {
	out := map[string]string{}
	err := filepath.WalkDir(dir, func(p string, d os.DirEntry, err error) error {
		if err == nil && strings.HasSuffix(p, ".ko") {
			out[strings.ReplaceAll(strings.TrimSuffix(filepath.Base(p), ".ko"), "-", "_")] = p
		}
		return nil
	})
	return out, err
}

// load loads a module after its dependencies, with do; a built-in one (no
// file) is fine.
func load(mods map[string]string, loaded map[string]bool, name string, do func(string) error) error {
	name = strings.ReplaceAll(name, "-", "_")
	if loaded[name] {
		return nil
	}
	loaded[name] = true
	p, ok := mods[name]
	if !ok {
		return nil // built in
	}
	for _, dep := range depends(p) {
		if err := load(mods, loaded, dep, do); err != nil {
			return err
		}
	}
	return do(p)
}

func finit(p string) error {
	f, err := os.Open(p)
	if err != nil {
		return err
	}
	defer f.Close()
	if err := unix.FinitModule(int(f.Fd()), "", 0); err != nil && err != unix.EEXIST {
		return fmt.Errorf("load %s: %w", p, err)
	}
	return nil
}

// depends reads the depends= entry of a module's .modinfo section.
func depends(p string) []string {
	f, err := elf.Open(p)
	if err != nil {
		return nil
	}
	defer f.Close()
	s := f.Section(".modinfo")
	if s == nil {
		return nil
	}
	b, err := s.Data()
	if err != nil {
		return nil
	}
	for _, kv := range bytes.Split(b, []byte{0}) {
		if v, ok := bytes.CutPrefix(kv, []byte("depends=")); ok && len(v) > 0 {
			return strings.Split(string(v), ",")
		}
	}
	return nil
}

// pack writes the initramfs as a newc cpio archive.
func pack(out, initBin, moddir string) error {
	mods, err := index(moddir)
	if err != nil {
		return err
	}
	release := filepath.Base(moddir)
	files := map[string]string{"init": initBin} // archive path -> host file
	loaded := map[string]bool{}
	for _, m := range rootModules {
		err := load(mods, loaded, m, func(p string) error {
			rel, err := filepath.Rel(moddir, p)
			files["lib/modules/"+release+"/"+rel] = p
			return err
		})
		if err != nil {
			return err
		}
	}
	var buf bytes.Buffer
	ino := 1
	hdr := func(name string, mode uint32, size int) {
		fmt.Fprintf(&buf, "070701%08X%08X%08X%08X%08X%08X%08X%08X%08X%08X%08X%08X%08X",
			ino, mode, 0, 0, 1, 0, size, 0, 0, 0, 0, len(name)+1, 0)
		buf.WriteString(name + "\x00")
		for buf.Len()%4 != 0 {
			buf.WriteByte(0)
		}
		ino++
	}
	dirs := map[string]bool{}
	for name := range files {
		for d := filepath.Dir(name); d != "." && !dirs[d]; d = filepath.Dir(d) {
			dirs[d] = true
		}
	}
	for _, d := range sorted(dirs) {
		hdr(d, 0o40755, 0)
	}
	for _, name := range sortedKeys(files) {
		b, err := os.ReadFile(files[name])
		if err != nil {
			return err
		}
		hdr(name, 0o100755, len(b))
		buf.Write(b)
		for buf.Len()%4 != 0 {
			buf.WriteByte(0)
		}
	}
	hdr("TRAILER!!!", 0, 0)
	return os.WriteFile(out, buf.Bytes(), 0o644)
}

func sorted(m map[string]bool) []string {
	var out []string
	for k := range m {
		out = append(out, k)
	}
	slices.Sort(out) // parents sort before their children
	return out
}

func sortedKeys(m map[string]string) []string {
	var out []string
	for k := range m {
		out = append(out, k)
	}
	slices.Sort(out)
	return out
}

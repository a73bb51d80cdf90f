// captf-copy copies a directory tree: `captf-copy SRC DST`.
//
// It is the one program a runner Job runs from a module image, in the copy shape of a
// module image Job (docs/module-image.md): a module image holds no shell and no copier,
// so an init container from the runner image puts this static binary into a shared
// emptyDir, and an init container from the module image runs it to copy the image's
// /captf into another emptyDir, which the runner reads. Static (CGO_ENABLED=0), with no
// dependency beyond Go's standard library, so it runs in an image that has no libc.
//
// Regular files keep their executable bits and are made writable by their owner (the
// emptyDir is the pod's, and must be removable when the pod goes); directories are
// 0755; symbolic links are copied as links when their target stays inside SRC and
// refused otherwise; anything else (devices, FIFOs, sockets) is refused. Any failure
// exits 1 with one line on standard error naming the path.
package main

import (
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
)

func main() {
	if len(os.Args) != 3 {
		fmt.Fprintln(os.Stderr, "usage: captf-copy SRC DST")
		os.Exit(2)
	}
	if err := copyTree(os.Args[1], os.Args[2]); err != nil {
		fmt.Fprintln(os.Stderr, "captf-copy:", err)
		os.Exit(1)
	}
}

func copyTree(src, dst string) error {
	root, err := filepath.Abs(src)
	if err != nil {
		return err
	}
	info, err := os.Stat(root)
	if err != nil {
		return err
	}
	if !info.IsDir() {
		return fmt.Errorf("%s is not a directory", src)
	}
	return filepath.WalkDir(root, func(path string, entry fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		rel, err := filepath.Rel(root, path)
		if err != nil {
			return err
		}
		target := filepath.Join(dst, rel)
		switch mode := entry.Type(); {
		case mode.IsDir():
			return os.MkdirAll(target, 0o755)
		case mode&fs.ModeSymlink != 0:
			return copyLink(root, path, target)
		case mode.IsRegular():
			return copyFile(path, target)
		default:
			return fmt.Errorf("%s: not a file, directory or link", path)
		}
	})
}

func copyLink(root, path, target string) error {
	link, err := os.Readlink(path)
	if err != nil {
		return err
	}
	resolved := link
	if !filepath.IsAbs(link) {
		resolved = filepath.Join(filepath.Dir(path), link)
	}
	if resolved != root && !strings.HasPrefix(resolved, root+string(filepath.Separator)) {
		return fmt.Errorf("%s: a link that leaves the tree", path)
	}
	return os.Symlink(link, target)
}

func copyFile(path, target string) error {
	info, err := os.Stat(path)
	if err != nil {
		return err
	}
	in, err := os.Open(path)
	if err != nil {
		return err
	}
	defer in.Close()
	mode := fs.FileMode(0o644)
	if info.Mode()&0o111 != 0 {
		mode = 0o755
	}
	out, err := os.OpenFile(target, os.O_WRONLY|os.O_CREATE|os.O_EXCL, mode)
	if err != nil {
		return err
	}
	if _, err := io.Copy(out, in); err != nil {
		out.Close()
		return err
	}
	return out.Close()
}

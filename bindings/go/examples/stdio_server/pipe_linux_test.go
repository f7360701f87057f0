package main

import (
	"os"
	"syscall"
	"unsafe"
)

// fGetPipeSz is F_GETPIPE_SZ (fcntl), which syscall does not name.
const fGetPipeSz = 1032

// unread reports how many bytes wait unread in the pipe f reads from (FIONREAD) and the
// pipe's size (F_GETPIPE_SZ); false when it cannot tell.
func unread(f *os.File) (n, size int, ok bool) {
	raw, err := f.SyscallConn()
	if err != nil {
		return 0, 0, false
	}
	var waiting int32
	var errno syscall.Errno
	var got uintptr
	if err := raw.Control(func(fd uintptr) {
		_, _, errno = syscall.Syscall(syscall.SYS_IOCTL, fd, syscall.TIOCINQ, uintptr(unsafe.Pointer(&waiting)))
		if errno == 0 {
			got, _, errno = syscall.Syscall(syscall.SYS_FCNTL, fd, fGetPipeSz, 0)
		}
	}); err != nil || errno != 0 {
		return 0, 0, false
	}
	return int(waiting), int(got), true
}

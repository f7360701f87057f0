package main

import (
	"os"
	"syscall"
	"unsafe"
)

// unread reports how many bytes wait unread in the pipe f reads from (FIONREAD); false when
// it cannot tell.
func unread(f *os.File) (int, bool) {
	raw, err := f.SyscallConn()
	if err != nil {
		return 0, false
	}
	var n int32
	var errno syscall.Errno
	if err := raw.Control(func(fd uintptr) {
		_, _, errno = syscall.Syscall(syscall.SYS_IOCTL, fd, syscall.TIOCINQ, uintptr(unsafe.Pointer(&n)))
	}); err != nil || errno != 0 {
		return 0, false
	}
	return int(n), true
}

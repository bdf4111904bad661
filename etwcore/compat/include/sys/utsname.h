/* sys/utsname.h — uname() for Windows builds (etwcore/compat/win_compat.c fills it from
 * RtlGetVersion / GetNativeSystemInfo / GetComputerNameA). Only on the Windows include path. */
#ifndef ETWD_WIN_SYS_UTSNAME_H
#define ETWD_WIN_SYS_UTSNAME_H

struct utsname {
  char sysname[65];  /* "Windows" (or "Windows (wine 8.0)") */
  char nodename[65];
  char release[65];  /* "10.0.22631" */
  char version[65];
  char machine[65];  /* "x86_64" */
};

int uname(struct utsname *u);

#endif

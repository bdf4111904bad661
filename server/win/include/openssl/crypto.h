/* see openssl/sha.h: the Windows CNG shim of the calls server/auth.c makes */
#include "sha.h"

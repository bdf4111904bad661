/* see openssl/sha.h: the Windows CNG shim of the calls api/auth.c makes */
#include "sha.h"

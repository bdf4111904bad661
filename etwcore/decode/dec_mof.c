/* dec_mof.c — classic kernel (MSNT_SystemTrace MOF) events and KernelTraceControl classic
 * events: names (PerfView style "Task/Opcode") and payload layouts per version.
 *
 * Layouts are written as compact field strings: each field is a type letter followed by its
 * name, separated by spaces. Types: p pointer (hex), z pointer-sized number, u u32, i i32,
 * h u16, n u16 network order (port), b u8, c i8, q u64, j i64, x u32 hex, X u64 hex, t raw clock u64,
 * f FILETIME, w UTF-16z, a ANSIz, s kernel SID (TOKEN_USER + SID or a 0 u32), 4 IPv4, 6 IPv6,
 * g GUID, S pointer array to the end (stack), C<n> fixed array of n UTF-16 characters. Fields past the payload end are omitted (older
 * or shorter versions); bytes past the last field are ignored. Facts: etl-format.md §5, §11.
 */
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <string.h>

#include "decode.h"

/* ---- names */
static const char *const EVENTTRACE_OPS[256] = {
    [5] = "Extension", [8] = "RundownComplete", [32] = "EndExtension", [64] = "DbgIdRSDS",
    [66] = "BuildInfo", [67] = "ProviderBinaryPath", [80] = "PartitionInfoExtension",
    [82] = "LastDroppedTimes"};
static const char *const PROCESS_OPS[256] = {
    [1] = "Start", [2] = "Stop", [3] = "DCStart", [4] = "DCStop", [11] = "Terminate",
    [32] = "PerfCtr", [33] = "PerfCtrRundown", [39] = "Defunct"};
static const char *const THREAD_OPS[256] = {
    [1] = "Start", [2] = "Stop", [3] = "DCStart", [4] = "DCStop", [36] = "CSwitch",
    [50] = "ReadyThread"};
static const char *const IMAGE_OPS[256] = {
    [2] = "Unload", [3] = "DCStart", [4] = "DCStop", [10] = "Load", [33] = "KernelBase"};
static const char *const DISK_OPS[256] = {
    [10] = "Read", [11] = "Write", [12] = "ReadInit", [13] = "WriteInit", [14] = "FlushBuffers",
    [15] = "FlushInit"};
static const char *const MEMORY_OPS[256] = {
    [10] = "TransitionFault", [11] = "DemandZeroFault", [12] = "CopyOnWrite",
    [13] = "GuardPageFault", [14] = "HardPageFault", [15] = "AccessViolation",
    [32] = "HardFault"};
static const char *const FILE_OPS[256] = {
    [0] = "Name", [32] = "FileCreate", [35] = "FileDelete", [36] = "FileRundown", [64] = "Create",
    [65] = "Cleanup", [66] = "Close", [67] = "Read", [68] = "Write", [69] = "SetInfo",
    [70] = "Delete", [71] = "Rename", [72] = "DirEnum", [73] = "Flush", [74] = "QueryInfo",
    [75] = "FSControl", [76] = "OperationEnd", [77] = "DirNotify", [79] = "DeletePath",
    [80] = "RenamePath", [81] = "SetLinkPath"};
static const char *const TCP_OPS[256] = {
    [10] = "Send", [11] = "Recv", [12] = "Connect", [13] = "Disconnect", [14] = "Retransmit",
    [15] = "Accept", [16] = "Reconnect", [17] = "Fail", [18] = "TCPCopy", [26] = "SendIPV6",
    [27] = "RecvIPV6", [28] = "ConnectIPV6", [29] = "DisconnectIPV6", [30] = "RetransmitIPV6",
    [31] = "AcceptIPV6", [32] = "ReconnectIPV6", [34] = "TCPCopyIPV6"};
static const char *const UDP_OPS[256] = {
    [10] = "Send", [11] = "Recv", [17] = "Fail", [26] = "SendIPV6", [27] = "RecvIPV6"};
static const char *const PERF_OPS[256] = {
    [46] = "Sample", [51] = "SysClEnter", [52] = "SysClExit", [66] = "ThreadedDPC", [67] = "ISR",
    [68] = "DPC", [69] = "TimerDPC", [73] = "CollectionStart", [74] = "CollectionEnd"};
static const char *const CONFIG_OPS[256] = {
    [10] = "CPU", [11] = "PhyDisk", [12] = "LogDisk", [13] = "NIC", [14] = "Video",
    [15] = "Services", [16] = "Power", [17] = "Network", [21] = "IRQ", [22] = "PnP",
    [23] = "IDEChannel", [25] = "Platform"};
/* 34–38: stack-key events (names per ntwmi's STACKWALK_KEY_* order; 35/36 verified to carry a
 * key + kernel / user return addresses, 37/38 an event's key reference) */
static const char *const STACK_OPS[256] = {[32] = "Stack", [34] = "KeyDelete", [35] = "KeyRundown",
                                           [36] = "KeyCreate", [37] = "KeyKernel", [38] = "KeyUser"};
static const char *const REG_OPS[256] = {
    [10] = "Create", [11] = "Open", [12] = "Delete", [13] = "Query", [14] = "SetValue",
    [15] = "DeleteValue", [16] = "QueryValue", [17] = "EnumerateKey", [18] = "EnumerateValueKey",
    [19] = "QueryMultipleValue", [20] = "SetInformation", [21] = "Flush", [22] = "KCBCreate",
    [23] = "KCBDelete", [24] = "KCBRundownBegin", [25] = "KCBRundownEnd", [26] = "Virtualize",
    [27] = "Close"};

struct group {
  const char *task;
  const char *const *ops;
};
static const struct group GROUPS[32] = {
    [0x00] = {"EventTrace", EVENTTRACE_OPS}, [0x01] = {"DiskIO", DISK_OPS},
    [0x02] = {"Memory", MEMORY_OPS},         [0x03] = {"Process", PROCESS_OPS},
    [0x04] = {"FileIO", FILE_OPS},           [0x05] = {"Thread", THREAD_OPS},
    [0x06] = {"TcpIp", TCP_OPS},             [0x07] = {"Job", NULL},
    [0x08] = {"UdpIp", UDP_OPS},             [0x09] = {"Registry", REG_OPS},
    [0x0A] = {"DbgPrint", NULL},             [0x0B] = {"SystemConfig", CONFIG_OPS},
    [0x0E] = {"Pool", NULL},                 [0x0F] = {"PerfInfo", PERF_OPS},
    [0x10] = {"Heap", NULL},                 [0x11] = {"Object", NULL},
    [0x12] = {"Power", NULL},                [0x14] = {"Image", IMAGE_OPS},
    [0x15] = {"Dpc", NULL},                  [0x16] = {"CC", NULL},
    [0x17] = {"CritSec", NULL},              [0x18] = {"StackWalk", STACK_OPS},
    [0x1A] = {"ALPC", NULL},                 [0x1B] = {"SplitIo", NULL},
    [0x1C] = {"ThreadPool", NULL},
};

/* Group GUIDs (Windows byte layout) for records with a kernel header. */
#define G ETW_GUID_BYTES
static const unsigned char GROUP_GUID[32][16] = {
    [0x00] = G(0x68fdd900, 0x4a3e, 0x11d1, 0x84, 0xf4, 0x00, 0x00, 0xf8, 0x04, 0x64, 0xe3),
    [0x01] = G(0x3d6fa8d4, 0xfe05, 0x11d0, 0x9d, 0xda, 0x00, 0xc0, 0x4f, 0xd7, 0xba, 0x7c),
    [0x02] = G(0x3d6fa8d3, 0xfe05, 0x11d0, 0x9d, 0xda, 0x00, 0xc0, 0x4f, 0xd7, 0xba, 0x7c),
    [0x03] = G(0x3d6fa8d0, 0xfe05, 0x11d0, 0x9d, 0xda, 0x00, 0xc0, 0x4f, 0xd7, 0xba, 0x7c),
    [0x04] = G(0x90cbdc39, 0x4a3e, 0x11d1, 0x84, 0xf4, 0x00, 0x00, 0xf8, 0x04, 0x64, 0xe3),
    [0x05] = G(0x3d6fa8d1, 0xfe05, 0x11d0, 0x9d, 0xda, 0x00, 0xc0, 0x4f, 0xd7, 0xba, 0x7c),
    [0x06] = G(0x9a280ac0, 0xc8e0, 0x11d1, 0x84, 0xe2, 0x00, 0xc0, 0x4f, 0xb9, 0x98, 0xa2),
    [0x08] = G(0xbf3a50c5, 0xa9c9, 0x4988, 0xa0, 0x05, 0x2d, 0xf0, 0xb7, 0xc8, 0x0f, 0x80),
    [0x09] = G(0xae53722e, 0xc863, 0x11d2, 0x86, 0x59, 0x00, 0xc0, 0x4f, 0xa3, 0x21, 0xa1),
    [0x0B] = G(0x01853a65, 0x418f, 0x4f36, 0xae, 0xfc, 0xdc, 0x0f, 0x1d, 0x2f, 0xd2, 0x35),
    [0x0F] = G(0xce1dbfb4, 0x137e, 0x4da6, 0x87, 0xb0, 0x3f, 0x59, 0xaa, 0x10, 0x2c, 0xbc),
    [0x14] = G(0x2cb15d1d, 0x5fc1, 0x11d2, 0xab, 0xe1, 0x00, 0xa0, 0xc9, 0x11, 0xf5, 0x18),
    [0x18] = G(0xdef2fe46, 0x7bd6, 0x4b80, 0xbd, 0x94, 0xf5, 0x7f, 0xe2, 0x0d, 0x0c, 0xe3),
};
static const unsigned char KTC_IMAGEID[16] =
    G(0xb3e675d7, 0x2554, 0x4f18, 0x83, 0x0b, 0x27, 0x62, 0x73, 0x25, 0x60, 0xde);
static const unsigned char SYSCONFIG_EX[16] =
    G(0x9b79ee91, 0xb5fd, 0x41c0, 0xa2, 0x43, 0x42, 0x48, 0xe2, 0x66, 0xe9, 0xd0);

/* Effective (group, type) of a kernel record; the legacy 0x030A hook is Image/Load. */
static void group_type(const struct etw_rec *r, unsigned *g, unsigned *t) {
  *g = r->hook_id >> 8;
  *t = r->hook_id & 255;
  if (*g == 3 && *t == 10) *g = 0x14;
}

int dec_mof_names(const struct etw_rec *r, const char **task, const char **opcode) {
  *task = *opcode = NULL;
  if (r->kind == ETW_REC_SYSTEM || r->kind == ETW_REC_PERFINFO) {
    unsigned g, t;
    group_type(r, &g, &t);
    if (g >= 32 || !GROUPS[g].task) return 0;
    *task = GROUPS[g].task;
    if (g == 0 && t == 0) {
      *opcode = "";
      return 1;
    }
    if (GROUPS[g].ops) *opcode = GROUPS[g].ops[t];
    return 1;
  }
  unsigned t = r->desc.opcode;
  if (!memcmp(r->provider_id, KTC_IMAGEID, 16)) {
    *task = "ImageID";
    *opcode = t == 0 ? "" : t == 32 ? "None" : t == 36 ? "DbgID_RSDS" : t == 37 ? "DbgID_ILRSDS"
            : t == 38 ? "DbgPPDB" : t == 40 ? "DbgDeterm" : t == 64 ? "FileVersion" : NULL;
    return 2;
  }
  if (!memcmp(r->provider_id, DEC_GUID_KTC_METADATA, 16)) {
    *task = "MetaData";
    *opcode = t == 32 ? "EventInfo" : t == 33 ? "EventMapInfo" : NULL;
    return 2;
  }
  if (!memcmp(r->provider_id, SYSCONFIG_EX, 16)) {
    *task = "SysConfig";
    *opcode = t == 32 ? "BuildInfo" : t == 33 ? "SystemPaths" : t == 34 ? "UnknownVolume"
            : t == 35 ? "VolumeMapping" : NULL;
    return 1;
  }
  for (unsigned g = 0; g < 32; g++) {
    if (!GROUPS[g].task || !memcmp(GROUP_GUID[g], (const unsigned char[16]){0}, 16)) continue;
    if (!memcmp(r->provider_id, GROUP_GUID[g], 16)) {
      *task = GROUPS[g].task;
      if (GROUPS[g].ops) *opcode = GROUPS[g].ops[t];
      return 1;
    }
  }
  return 0;
}

/* ---- layouts */
struct layout {
  uint8_t group;        /* kernel group, or 0xFF for a classic GUID (guid below) */
  const unsigned char *guid;
  uint8_t vmin, vmax;
  const uint8_t *types; /* 0-terminated (type 0 itself listed as 255) */
  const char *fields;
};

#define T(...) (const uint8_t[]){__VA_ARGS__, 0}
#define PROC_V2 "pUniqueProcessKey uProcessId uParentId uSessionId iExitStatus sUserSID aImageFileName wCommandLine"
#define PROC_V3 "pUniqueProcessKey uProcessId uParentId uSessionId iExitStatus pDirectoryTableBase sUserSID aImageFileName wCommandLine"
#define PROC_V4 "pUniqueProcessKey uProcessId uParentId uSessionId iExitStatus pDirectoryTableBase uFlags sUserSID aImageFileName wCommandLine wPackageFullName wApplicationId qExitTime"
#define THREAD_V3 "uProcessId uTThreadId pStackBase pStackLimit pUserStackBase pUserStackLimit pAffinity pWin32StartAddr pTebBase uSubProcessTag bBasePriority bPagePriority bIoPriority bThreadFlags wThreadName"
#define IMAGE_V2 "pImageBase zImageSize uProcessId uImageCheckSum iTimeDateStamp uReserved0 pDefaultBase uReserved1 uReserved2 uReserved3 uReserved4 wFileName"
#define IMAGE_V3 "pImageBase zImageSize uProcessId uImageCheckSum iTimeDateStamp bSignatureLevel bSignatureType hReserved0 pDefaultBase uReserved1 uReserved2 uReserved3 uReserved4 wFileName"
#define DEFRAG "qAlignmentClusters qAvgFreeSpaceSize qClustersPerSlab qFragmentedDirectoryExtents qFragmentedExtents qFreeSpaceCount qLargestFreeSpaceSize qLastRunActualPurgeClusters qLastRunClustersTrimmed qLastRunFullDefragTime qLastRunTime qMFTSize qTotalClusters qTotalUsedClusters uAvgFragmentsPerFile uBytesPerCluster uDirectoryCount uFragmentedDirectories uFragmentedFiles uFragmentedSpace uHardwareIssue uInUseMFTRecords uInUseSlabs uLastRunActualPurgeSlabs uLastRunInitialBackedSlabs uLastRunPercentFragmentation uLastRunPinnedSlabs uLastRunPotentialPurgeSlabs uLastRunSpaceInefficientSlabs uLastRunTrimmedSlabs uLastRunUnknownEvictFailSlabs uLastRunVolsnapPinnedSlabs uMFTFragmentCount uMovableFiles uTotalMFTRecords uTotalSlabs uUnmovableFiles gVolumeId wVolumePathNames"
#define TCP4 "uPID usize 4daddr 4saddr ndport nsport"
#define TCP6 "uPID usize 6daddr 6saddr ndport nsport"

static const struct layout LAYOUTS[] = {
    {0x00, NULL, 0, 255, T(5, 32), "uGroupMask1 uGroupMask2 uGroupMask3 uGroupMask4 uGroupMask5 uGroupMask6 uGroupMask7 uGroupMask8 uKernelEventVersion"},
    {0x00, NULL, 0, 255, T(8), ""},
    {0x00, NULL, 0, 255, T(64), "gGuidSig uAge aPdbFileName"},
    {0x00, NULL, 0, 255, T(66), "aBuildString"},
    {0x00, NULL, 0, 255, T(80), "hEventVersion hReserved uPartitionType qQpcOffsetFromRoot gPartitionId gParentId"},
    {0x03, NULL, 4, 255, T(1, 2, 3, 4, 39), PROC_V4},
    {0x03, NULL, 3, 3, T(1, 2, 3, 4, 39), PROC_V3},
    {0x03, NULL, 2, 2, T(1, 2, 3, 4, 39), PROC_V2},
    {0x03, NULL, 2, 255, T(11), "uProcessId"},
    {0x03, NULL, 2, 255, T(32, 33), "uProcessId uPageFaultCount uHandleCount uReserved zPeakVirtualSize zPeakWorkingSetSize zPeakPagefileUsage zQuotaPeakPagedPoolUsage zQuotaPeakNonPagedPoolUsage zVirtualSize zWorkingSetSize zPagefileUsage zQuotaPagedPoolUsage zQuotaNonPagedPoolUsage zPrivatePageCount"},
    {0x05, NULL, 2, 255, T(1, 2, 3, 4), THREAD_V3},
    {0x05, NULL, 2, 255, T(36), "uNewThreadId uOldThreadId cNewThreadPriority cOldThreadPriority bPreviousCState cSpareByte cOldThreadWaitReason cOldThreadWaitMode cOldThreadState cOldThreadWaitIdealProcessor uNewThreadWaitTime uReserved"},
    {0x05, NULL, 2, 255, T(50), "uTThreadId cAdjustReason cAdjustIncrement bFlag bReserved"},
    {0x14, NULL, 3, 255, T(2, 3, 4, 10), IMAGE_V3},
    {0x14, NULL, 2, 2, T(2, 3, 4, 10), IMAGE_V2},
    {0x14, NULL, 0, 255, T(33), "pImageBase"},
    /* HypercallPage (MOF class of Image v2; name kept as PerfView's Opcode(34)) */
    {0x14, NULL, 0, 255, T(34), "pHypercallPageVa"},
    {0x01, NULL, 2, 255, T(10, 11), "uDiskNumber xIrpFlags uTransferSize uReserved qByteOffset pFileObject pIrp tHighResResponseTime uIssuingThreadId"},
    {0x01, NULL, 2, 255, T(12, 13, 15), "pIrp uIssuingThreadId"},
    {0x01, NULL, 2, 255, T(14), "uDiskNumber xIrpFlags tHighResResponseTime pIrp uIssuingThreadId"},
    {0x02, NULL, 2, 255, T(32), "tInitialTime qReadOffset pVirtualAddress pFileObject uTThreadId uByteCount"},
    {0x02, NULL, 2, 255, T(10, 11, 12, 13, 14), "pVirtualAddress pProgramCounter"},
    {0x04, NULL, 2, 255, T(255, 32, 35, 36), "pFileObject wFileName"},
    {0x04, NULL, 3, 255, T(64), "pIrpPtr pFileObject uTTID uCreateOptions uFileAttributes uShareAccess wOpenPath"},
    {0x04, NULL, 3, 255, T(65, 66, 73), "pIrpPtr pFileObject pFileKey uTTID"},
    {0x04, NULL, 3, 255, T(67, 68), "qOffset pIrpPtr pFileObject pFileKey uTTID uIoSize uIoFlags"},
    {0x04, NULL, 3, 255, T(69, 70, 71, 74, 75), "pIrpPtr pFileObject pFileKey pExtraInfo uTTID uInfoClass"},
    {0x04, NULL, 3, 255, T(72, 77), "pIrpPtr pFileObject pFileKey uTTID uLength uInfoClass uFileIndex wFileName"},
    {0x04, NULL, 2, 255, T(76), "pIrpPtr pExtraInfo uNtStatus"},
    {0x04, NULL, 3, 255, T(79, 80, 81), "pIrpPtr pFileObject pFileKey pExtraInfo uTTID uInfoClass wFileName"},
    {0x06, NULL, 2, 255, T(10), TCP4 " ustartime uendtime useqnum pconnid"},
    {0x06, NULL, 2, 255, T(11, 13, 14, 16, 18), TCP4 " useqnum pconnid"},
    {0x06, NULL, 2, 255, T(12, 15), TCP4 " hmss hsackopt htsopt hwsopt urcvwin hrcvwinscale hsndwinscale useqnum pconnid"},
    {0x06, NULL, 2, 255, T(17), "hProto hFailureCode"},
    {0x06, NULL, 2, 255, T(26), TCP6 " ustartime uendtime useqnum pconnid"},
    {0x06, NULL, 2, 255, T(27, 29, 30, 32, 34), TCP6 " useqnum pconnid"},
    {0x06, NULL, 2, 255, T(28, 31), TCP6 " hmss hsackopt htsopt hwsopt urcvwin hrcvwinscale hsndwinscale useqnum pconnid"},
    {0x08, NULL, 2, 255, T(10, 11), TCP4 " useqnum pconnid"},
    {0x08, NULL, 2, 255, T(26, 27), TCP6 " useqnum pconnid"},
    {0x08, NULL, 2, 255, T(17), "hProto hFailureCode"},
    {0x0F, NULL, 2, 255, T(46), "pInstructionPointer uThreadId hCount hReserved"},
    {0x0F, NULL, 2, 255, T(73, 74), "uSource uNewInterval uOldInterval wSourceName"},
    {0x0F, NULL, 2, 255, T(51), "pSysCallAddress"},
    {0x0F, NULL, 2, 255, T(52), "xSysCallNtStatus"},
    {0x18, NULL, 2, 255, T(32), "tEventTimeStamp uStackProcess uStackThread SStack"},
    {0x18, NULL, 2, 255, T(34, 35, 36), "pStackKey SStack"},
    {0x18, NULL, 2, 255, T(37, 38), "tEventTimeStamp uStackProcess uStackThread pStackKey"},
    /* CPU: HyperThreadingFlag is pointer-sized (Microsoft Learn SystemConfig_CPU: "Pointer"), then
     * HighestUserAddress (pointer), ProcessorArchitecture/Level/Revision (u16), NxEnabled,
     * PaeEnabled (u8), MemorySpeed (u32): 828 bytes on x64 (v3, verified on net.4.5.2.x64) */
    /* SystemConfig by version (facts: the MSNT_SystemTrace MOF classes SystemConfig_V0 … _V5,
     * etl-format.md §0). v0/v1 PhyDisk, LogDisk, Video, IRQ, Power and PnP are v2's layout (or a
     * prefix of it); CPU, Services and NIC v0/v1 differ (fixed-size strings). */
    {0x0B, NULL, 0, 1, T(10), "uMHz uNumberOfProcessors uMemSize uPageSize uAllocationGranularity C256ComputerName C132DomainName pHyperThreadingFlag"},
    {0x0B, NULL, 0, 1, T(15), "C34ServiceName C256DisplayName C34ProcessName uProcessId"},
    {0x0B, NULL, 0, 1, T(13), "C256NICName uIndex uPhysicalAddrLen C8PhysicalAddr uSize iIpAddress iSubnetMask iDhcpServer iGateway iPrimaryWinsServer iSecondaryWinsServer iDnsServer1 iDnsServer2 iDnsServer3 iDnsServer4 uData"},
    {0x0B, NULL, 2, 255, T(10), "uMHz uNumberOfProcessors uMemSize uPageSize uAllocationGranularity C256ComputerName C134DomainName pHyperThreadingFlag pHighestUserAddress hProcessorArchitecture hProcessorLevel hProcessorRevision bNxEnabled bPaeEnabled uMemorySpeed"},
    {0x0B, NULL, 0, 255, T(11), "uDiskNumber uBytesPerSector uSectorsPerTrack uTracksPerCylinder qCylinders uSCSIPort uSCSIPath uSCSITarget uSCSILun C256Manufacturer uPartitionCount bWriteCacheEnabled bPad C3BootDriveLetter C2Spare"},
    {0x0B, NULL, 0, 255, T(12), "qStartOffset qPartitionSize uDiskNumber uSize uDriveType C4DriveLetterString uPad1 uPartitionNumber uSectorsPerCluster uBytesPerSector uPad2 jNumberOfFreeClusters jTotalNumberOfClusters C16FileSystem uVolumeExt uPad3"},
    {0x0B, NULL, 2, 255, T(13), "XPhysicalAddr uPhysicalAddrLen uIpv4Index uIpv6Index wNICDescription wIpAddresses wDnsServerAddresses"},
    {0x0B, NULL, 0, 255, T(14), "uMemorySize uXResolution uYResolution uBitsPerPixel uVRefresh C256ChipType C256DACType C256AdapterString C256BiosString C256DeviceId xStateFlags"},
    /* IRQ v3 (Win7+): the processor group (u16) and a reserved u16 follow IRQAffinity */
    {0x0B, NULL, 3, 255, T(21), "XIRQAffinity hIRQGroup hReserved uIRQNum uDeviceDescriptionLen wDeviceDescription"},
    {0x0B, NULL, 0, 2, T(21), "XIRQAffinity uIRQNum uDeviceDescriptionLen wDeviceDescription"},
    {0x0B, NULL, 2, 255, T(23), "uTargetId xDeviceType xDeviceTimingMode uLocationInformationLen wLocationInformation"},
    {0x0B, NULL, 2, 255, T(25), "wSystemManufacturer wSystemProductName wBiosDate wBiosVersion"},
    /* Services v3 (Win8): two more strings, the service's load order group and its svchost group
     * (names ours; e.g. "AudioGroup" / "LocalSystemNetworkRestricted", verified on net.4.5.2.x64) */
    {0x0B, NULL, 3, 255, T(15), "uProcessId uServiceState uSubProcessTag wServiceName wDisplayName wProcessName wLoadOrderGroup wSvchostGroup"},
    {0x0B, NULL, 2, 2, T(15), "uProcessId uServiceState uSubProcessTag wServiceName wDisplayName wProcessName"},
    {0x0B, NULL, 0, 255, T(16), "bS1 bS2 bS3 bS4 bS5 bPad1 bPad2 bPad3"},
    /* type 18 (evntrace.h EVENT_TRACE_TYPE_CONFIG_OPTICALMEDIA; name kept as PerfView's
     * Opcode(18)): 4 x u16, 5 x u64, 3 x u32, 2 x u16, then the drive letter and file system
     * (UTF-16) and the device's SCSI product and vendor ids (ANSI; string names ours). Type 28
     * (EVENT_TRACE_TYPE_CONFIG_DPI): machine and user DPI. Verified on net.4.5.2.x64 (v2). */
    {0x0B, NULL, 2, 255, T(18), "hDiskNumber hBusType hDeviceType hMediaType qStartingOffset qSize qNumberOfFreeBlocks qTotalNumberOfBlocks qNextWritableAddress uNumberOfSessions uNumberOfTracks uBytesPerSector hDiscStatus hLastSessionStatus wDriveLetter wFileSystem aProductId aVendorId"},
    {0x0B, NULL, 2, 255, T(28), "uMachineDPI uUserDPI"},
    {0x0B, NULL, 2, 255, T(17), "uTcbTablePartitions iMaxHashTableSize uMaxUserPort uTcpTimedWaitDelay"},
    /* PnP: v3 = three u32 lengths + 3 strings (Microsoft Learn SystemConfig_PnP); v4 (Win8) =
     * ClassGuid, UpperFilterCount, LowerFilterCount, 5 strings, then UpperFilterCount and
     * LowerFilterCount strings (W<off>: the count is the u32 at payload offset off); v5 adds
     * DevStatus and DevProblem before the strings (v4 verified on net.4.5.2.x64) */
    {0x0B, NULL, 5, 255, T(22), "gClassGuid uUpperFilterCount uLowerFilterCount xDevStatus uDevProblem wDeviceID wDeviceDescription wFriendlyName wPdoName wServiceName W16UpperFilters W20LowerFilters"},
    {0x0B, NULL, 4, 4, T(22), "gClassGuid uUpperFilterCount uLowerFilterCount wDeviceID wDeviceDescription wFriendlyName wPdoName wServiceName W16UpperFilters W20LowerFilters"},
    {0x0B, NULL, 3, 3, T(22), "uIDLength uDescriptionLength uFriendlyNameLength wDeviceID wDeviceDescription wFriendlyName wPdoName"},
    {0x0B, NULL, 0, 2, T(22), "uIDLength uDescriptionLength uFriendlyNameLength wDeviceID wDeviceDescription wFriendlyName"},
    /* types 29–37 (Windows 10+; names kept as PerfView's Opcode(n)): CodeIntegrity, TelemetryInfo,
     * Defrag, MobilePlatform (v2, v3, v4+ differ), DeviceFamily, FlightIds, Processors,
     * Virtualization, Boot. Types 24, 26, 27 (NumaNode, ProcGroup, ProcNumber: counted numeric
     * arrays) have no field type here and stay undecoded (docs/etl.md). */
    {0x0B, NULL, 2, 255, T(29), "uCodeIntegrityInfo"},
    {0x0B, NULL, 2, 255, T(30), "gMachineId"},
    {0x0B, NULL, 2, 255, T(31), DEFRAG},
    {0x0B, NULL, 4, 255, T(32), "wDeviceManufacturer wDeviceManufacturerDisplayName wDeviceModel wDeviceModelDisplayName wMobileOperator wSocVersion wBspVersion"},
    {0x0B, NULL, 3, 3, T(32), "wDeviceManufacturer wDeviceManufacturerDisplayName wDeviceModel wDeviceModelDisplayName wMobileOperator wMobileOperatorDisplayName wHardwareVersion wSocVersion wRadioHardwareVersion wRadioSoftwareVersion wBspVersion wOemSoftwareVersion"},
    {0x0B, NULL, 2, 2, T(32), "wBootLoaderVersion wFirmwareRevision wFriendlyName wHardwareRevision wManufacturer wManufacturerDisplayName wManufacturerModelName wMobileOperatorDisplayName wMobileOperatorName wModelName wRadioHardwareRevision wRadioSoftwareRevision wROMVersion wSOCVersion wHardwareVariant"},
    {0x0B, NULL, 2, 255, T(33), "qUAPInfo uDeviceFamily uDeviceForm"},
    {0x0B, NULL, 2, 255, T(34), "wUpdateId wFlightIdList"},
    {0x0B, NULL, 2, 255, T(35), "uProcessorIndex uFeatureSet uProcessorSpeed C64ProcessorName C16VendorIdentifier C128ProcessorIdentifier"},
    {0x0B, NULL, 2, 255, T(36), "bVbsEnabled bHvciEnabled bHyperVisorEnabled bReserved"},
    {0x0B, NULL, 2, 255, T(37), "qBootFlags uFirmwareType bSecureBootEnabled bSecureBootCapable bReserved1 bReserved2"},
    {0xFF, KTC_IMAGEID, 0, 255, T(255), "pImageBase zImageSize uProcessId uTimeDateStamp wOriginalFileName"},
    {0xFF, KTC_IMAGEID, 0, 255, T(36), "pImageBase uProcessId gGuidSig uAge aPdbFileName"},
    {0xFF, KTC_IMAGEID, 0, 255, T(37), "pImageBase uProcessId gGuidSig uAge aPdbFileName"},
    /* DbgPPDB (portable PDB: TimeDateStamp, major and minor version, u16 each) and DbgDeterm
     * (deterministic build marker), PerfView's SymbolTraceEventParser layouts */
    {0xFF, KTC_IMAGEID, 0, 255, T(38), "pImageBase uProcessId uTimeDateStamp hMajorVersion hMinorVersion"},
    {0xFF, KTC_IMAGEID, 0, 255, T(40), "pImageBase uProcessId"},
    {0xFF, KTC_IMAGEID, 0, 255, T(64), "uImageSize uTimeDateStamp wOrigFileName wFileDescription wFileVersion wBinFileVersion wVerLanguage wProductName wCompanyName wProductVersion wFileId wProgramId"},
    {0xFF, SYSCONFIG_EX, 0, 255, T(32), "fInstallDate wBuildLab wProductName"},
    {0xFF, SYSCONFIG_EX, 0, 255, T(33), "wSystemDirectory wSystemWindowsDirectory"},
    {0xFF, SYSCONFIG_EX, 0, 255, T(34), "wValue"},
    {0xFF, SYSCONFIG_EX, 0, 255, T(35), "wNtPath wDosPath"},
};

/* Kernel layouts are looked up once per (HookId, version) per thread. */
struct lcache {
  uint32_t key;
  const struct layout *l;
};
static _Thread_local struct lcache LCACHE[1024];

static const struct layout *find_layout_slow(const struct etw_rec *r);

/* Classic records (KernelTraceControl etc.): cached by (provider GUID, opcode, version). */
struct ccache {
  unsigned char guid[16];
  uint32_t key; /* opcode << 8 | version, + 1 (0 = empty) */
  const struct layout *l;
};
static _Thread_local struct ccache CCACHE[64];

static const struct layout *find_layout(const struct etw_rec *r) {
  if (r->kind != ETW_REC_SYSTEM && r->kind != ETW_REC_PERFINFO) {
    uint32_t key = ((uint32_t)r->desc.opcode << 8 | r->desc.version) + 1;
    uint32_t h = (key ^ d_rd32(r->provider_id) ^ d_rd32(r->provider_id + 12)) * 2654435761u;
    struct ccache *c = &CCACHE[h >> 26];
    if (c->key != key || memcmp(c->guid, r->provider_id, 16)) {
      c->key = key;
      memcpy(c->guid, r->provider_id, 16);
      c->l = find_layout_slow(r);
    }
    return c->l;
  }
  uint32_t key = ((uint32_t)r->hook_id << 8 | r->desc.version) + 1;
  struct lcache *c = &LCACHE[(key * 2654435761u) >> 22];
  if (c->key != key) {
    c->key = key;
    c->l = find_layout_slow(r);
  }
  return c->l;
}

static const struct layout *find_layout_slow(const struct etw_rec *r) {
  unsigned g = 0xFF, t = r->desc.opcode;
  int kernel = r->kind == ETW_REC_SYSTEM || r->kind == ETW_REC_PERFINFO;
  if (kernel) group_type(r, &g, &t);
  for (size_t i = 0; i < sizeof LAYOUTS / sizeof LAYOUTS[0]; i++) {
    const struct layout *l = &LAYOUTS[i];
    if (kernel ? l->group != g : (l->group != 0xFF || memcmp(l->guid, r->provider_id, 16))) {
      /* classic records may also carry a kernel group GUID (relogged) */
      if (kernel || l->group == 0xFF || memcmp(GROUP_GUID[l->group], r->provider_id, 16)) continue;
    }
    if (r->desc.version < l->vmin || r->desc.version > l->vmax) continue;
    for (const uint8_t *p = l->types; *p; p++)
      if ((*p == 255 ? 0u : *p) == t) return l;
  }
  return NULL;
}

static int write_fields_n(struct etw_jw *w, const char *spec, const unsigned char *p, size_t n,
                          int ps, size_t *consumed);

/* One field spec (e.g. "wFileName") at @p; *k = bytes consumed. */
static int write_fields_one(struct etw_jw *w, const char *spec, const unsigned char *p, size_t n,
                            int ps, long *k) {
  size_t used = 0;
  int rc = write_fields_n(w, spec, p, n, ps, &used);
  *k = rc < 0 ? -1 : (long)used;
  return rc;
}

static int write_fields_n(struct etw_jw *w, const char *spec, const unsigned char *p, size_t n,
                          int ps, size_t *consumed) {
  size_t pos = 0;
  int first = 1;
  while (*spec) {
    char ty = *spec++;
    long fixed = -1;
    if (ty == 'C' || ty == 'W') { /* C<n>: fixed array of n UTF-16 characters; W<off>: array of
                                   * strings, count = the u32 at payload offset off */
      fixed = 0;
      while (*spec >= '0' && *spec <= '9') fixed = fixed * 10 + (*spec++ - '0');
    }
    const char *name = spec;
    while (*spec && *spec != ' ') spec++;
    size_t nl = (size_t)(spec - name);
    if (*spec == ' ') spec++;
    /* shorter version: the rest is absent (a W array whose count is in the payload is written,
     * [] for a count of 0, so both PnP filter arrays are always there) */
    if (pos >= n && !(ty == 'W' && (size_t)fixed + 4 <= n)) break;
    size_t avail = n - pos;
    const unsigned char *q = p + pos;
    size_t save = w->len;
    if (etw_jw_reserve(w, nl + 4)) return -1;
    char *o = w->buf + w->len;
    if (!first) *o++ = ',';
    *o++ = '"';
    memcpy(o, name, nl);
    o += nl;
    *o++ = '"';
    *o++ = ':';
    w->len = (size_t)(o - w->buf);
    long k = -1;
    switch (ty) {
    case 'p': k = dec_value(w, 16, 0, q, avail, -1, ps, DV_MANIFEST, NULL); break;
    case 'z': k = dec_value(w, 308, 0, q, avail, -1, ps, DV_MANIFEST, NULL); break;
    case 'u': k = dec_value(w, 8, 0, q, avail, -1, ps, DV_MANIFEST, NULL); break;
    case 'i': k = dec_value(w, 7, 0, q, avail, -1, ps, DV_MANIFEST, NULL); break;
    case 'x': k = dec_value(w, 8, 4, q, avail, -1, ps, DV_MANIFEST, NULL); break;
    case 'X': k = dec_value(w, 10, 4, q, avail, -1, ps, DV_MANIFEST, NULL); break;
    case 'h': k = dec_value(w, 6, 0, q, avail, -1, ps, DV_MANIFEST, NULL); break;
    case 'n': k = dec_value(w, 6, 7, q, avail, -1, ps, DV_MANIFEST, NULL); break;
    case 'b': k = dec_value(w, 4, 0, q, avail, -1, ps, DV_MANIFEST, NULL); break;
    case 'c': k = dec_value(w, 3, 0, q, avail, -1, ps, DV_MANIFEST, NULL); break;
    case 'q': case 't': k = dec_value(w, 10, 0, q, avail, -1, ps, DV_MANIFEST, NULL); break;
    case 'f': k = dec_value(w, 17, 0, q, avail, -1, ps, DV_MANIFEST, NULL); break;
    case 'w': { /* dec_value's UTF-16 case (manifest mode) without its dispatch: up to the NUL
                 * unit, or the rest of the payload when unterminated */
      size_t units = avail / 2, got = dec_str16(w, q, units);
      k = got < units ? (long)got * 2 + 2 : (long)avail;
      break;
    }
    case 'C': k = dec_value(w, 1, 0, q, avail, fixed, ps, DV_MANIFEST, NULL); break;
    case 'W': { /* count-driven array of NUL-terminated UTF-16 strings (PnP filter names) */
      if ((size_t)fixed + 4 > n) break;
      uint32_t cnt = d_rd32(p + fixed);
      if (cnt > avail / 2) break; /* each string takes at least its NUL unit */
      size_t used = 0;
      etw_jw_ch(w, '[');
      for (uint32_t e = 0; e < cnt; e++) {
        size_t units = (avail - used) / 2;
        if (units == 0) {
          used = (size_t)-1;
          break;
        }
        if (e) etw_jw_ch(w, ',');
        size_t got = dec_str16(w, q + used, units);
        if (got >= units) { /* unterminated: not a complete element */
          used = (size_t)-1;
          break;
        }
        used += got * 2 + 2;
      }
      etw_jw_ch(w, ']');
      if (used != (size_t)-1) k = (long)used;
      break;
    }
    case 'j': k = dec_value(w, 9, 0, q, avail, -1, ps, DV_MANIFEST, NULL); break;
    case 'a': k = dec_value(w, 2, 0, q, avail, -1, ps, DV_MANIFEST, NULL); break;
    case '4': k = dec_value(w, 8, 8, q, avail, -1, ps, DV_MANIFEST, NULL); break;
    case '6': k = dec_value(w, 14, 9, q, avail, 16, ps, DV_MANIFEST, NULL); break;
    case 'g': k = dec_value(w, 15, 0, q, avail, -1, ps, DV_MANIFEST, NULL); break;
    case 's': { /* kernel SID: 0 u32, or TOKEN_USER (2 pointers) + SID */
      if (avail < 4) break;
      if (d_rd32(q) == 0) {
        etw_jw_lit(w, "null");
        k = 4;
        break;
      }
      size_t tu = 2 * (size_t)ps;
      if (avail < tu) break;
      long s = dec_value(w, 19, 0, q + tu, avail - tu, -1, ps, DV_MANIFEST, NULL);
      if (s >= 0) k = (long)tu + s;
      break;
    }
    case 'S': {
      etw_jw_ch(w, '[');
      size_t m = avail / (size_t)ps;
      for (size_t i = 0; i < m; i++) {
        if (i) etw_jw_ch(w, ',');
        dec_value(w, 16, 0, q + i * (size_t)ps, (size_t)ps, -1, ps, DV_MANIFEST, NULL);
      }
      etw_jw_ch(w, ']');
      k = (long)(m * (size_t)ps);
      break;
    }
    default: break;
    }
    if (k < 0) { /* truncated field: stop at the last complete one */
      etw_jw_truncate(w, save);
      return -1;
    }
    first = 0;
    pos += (size_t)k;
  }
  if (consumed) *consumed = pos;
  return 0;
}

/* ---- compiled layouts: the field strings parsed once into keys + types (hot path) */
#define KF_MAX 24
#define N_LAYOUTS (sizeof LAYOUTS / sizeof LAYOUTS[0])
struct kfield {
  char ty;
  uint16_t fixed;
  uint8_t klen;     /* length of key, which starts with ',' */
  char key[48];     /* ,"Name": */
  char spec[48];    /* the field's spec text, for the general path */
};
struct klayout {
  int ok;           /* 0: not compilable, use the string walker */
  uint32_t fixed4, fixed8; /* payload bytes of the whole layout (4/8-byte pointers) when every
                              field has a fixed size, else 0 */
  uint8_t n;
  struct kfield f[KF_MAX];
};
static struct klayout COMPILED[N_LAYOUTS];
static pthread_once_t compiled_once = PTHREAD_ONCE_INIT;
static atomic_int compiled_done; /* set (release) when compile_all has run: skips pthread_once */

static void compile_all(void) {
  for (size_t i = 0; i < N_LAYOUTS; i++) {
    struct klayout *c = &COMPILED[i];
    const char *spec = LAYOUTS[i].fields;
    c->ok = 1;
    while (*spec) {
      if (c->n >= KF_MAX) {
        c->ok = 0;
        break;
      }
      struct kfield *f = &c->f[c->n++];
      f->ty = *spec++;
      f->fixed = 0;
      if (f->ty == 'W') { /* needs the whole payload (its count is elsewhere): string walker */
        c->ok = 0;
        break;
      }
      if (f->ty == 'C')
        while (*spec >= '0' && *spec <= '9') f->fixed = (uint16_t)(f->fixed * 10 + (*spec++ - '0'));
      const char *name = spec;
      while (*spec && *spec != ' ') spec++;
      size_t nl = (size_t)(spec - name);
      if (*spec == ' ') spec++;
      if (nl + 4 > sizeof f->key || nl + 8 > sizeof f->spec) {
        c->ok = 0;
        break;
      }
      f->key[0] = ',';
      f->key[1] = '"';
      memcpy(f->key + 2, name, nl);
      f->key[nl + 2] = '"';
      f->key[nl + 3] = ':';
      f->klen = (uint8_t)(nl + 4);
      if (f->ty == 'C') snprintf(f->spec, sizeof f->spec, "C%u%.*s", f->fixed, (int)nl, name);
      else snprintf(f->spec, sizeof f->spec, "%c%.*s", f->ty, (int)nl, name);
    }
    uint32_t t4 = 0, t8 = 0;
    for (unsigned k = 0; c->ok && k < c->n; k++) {
      switch (c->f[k].ty) {
      case 'u': case 'i': case 'x': t4 += 4; t8 += 4; break;
      case 'h': t4 += 2; t8 += 2; break;
      case 'b': case 'c': t4 += 1; t8 += 1; break;
      case 'q': case 't': case 'j': case 'X': t4 += 8; t8 += 8; break;
      case 'p': case 'z': t4 += 4; t8 += 8; break;
      default: t4 = t8 = 0; k = c->n; break; /* variable size: no whole-layout path */
      }
    }
    c->fixed4 = c->ok ? t4 : 0;
    c->fixed8 = c->ok ? t8 : 0;
  }
  atomic_store_explicit(&compiled_done, 1, memory_order_release);
}

/* The whole layout is in the payload and every field has a fixed size: one reservation, no
 * per-field bounds checks (same bytes as the per-field loop in write_compiled). */
static void write_fixed(struct etw_jw *w, const struct klayout *c, const unsigned char *q, int ps) {
  char *o = w->buf + w->len;
  for (unsigned i = 0; i < c->n; i++) {
    const struct kfield *f = &c->f[i];
    if (i) {
      memcpy(o, f->key, sizeof f->key);
      o += f->klen;
    } else {
      memcpy(o, f->key + 1, sizeof f->key - 1);
      o += f->klen - 1u;
    }
    switch (f->ty) {
    case 'u': o = dec_put_u64(o, d_rd32(q)); q += 4; break;
    case 'i': o = dec_put_i64(o, (int32_t)d_rd32(q)); q += 4; break;
    case 'x': o = dec_put_hex(o, d_rd32(q)); q += 4; break;
    case 'h': o = dec_put_u64(o, d_rd16(q)); q += 2; break;
    case 'b': o = dec_put_u64(o, q[0]); q += 1; break;
    case 'c': o = dec_put_i64(o, (int8_t)q[0]); q += 1; break;
    case 'q': case 't': o = dec_put_u64(o, d_rd64(q)); q += 8; break;
    case 'j': o = dec_put_i64(o, (int64_t)d_rd64(q)); q += 8; break;
    case 'X': o = dec_put_hex(o, d_rd64(q)); q += 8; break;
    case 'p': o = dec_put_hex(o, ps == 4 ? d_rd32(q) : d_rd64(q)); q += ps; break;
    case 'z': o = dec_put_u64(o, ps == 4 ? d_rd32(q) : d_rd64(q)); q += ps; break;
    default: break; /* not reached: write_fixed is used for fixed-size layouts only */
    }
  }
  w->len = (size_t)(o - w->buf);
}

/* Returns the payload bytes consumed, or -1. */
static long write_compiled(struct etw_jw *w, const struct layout *l, const unsigned char *p, size_t n,
                           int ps) {
  if (!atomic_load_explicit(&compiled_done, memory_order_acquire)) pthread_once(&compiled_once, compile_all);
  const struct klayout *c = &COMPILED[l - LAYOUTS];
  if (!c->ok) {
    size_t used = 0;
    return write_fields_n(w, l->fields, p, n, ps, &used) < 0 ? -1 : (long)used;
  }
  uint32_t need = ps == 4 ? c->fixed4 : c->fixed8;
  /* room per field: a 48-byte key copy, or the key and a number of at most 21 bytes */
  if (need && (ps == 4 || ps == 8) && n >= need && !etw_jw_reserve(w, (size_t)c->n * 72)) {
    write_fixed(w, c, p, ps);
    return (long)need;
  }
  size_t pos = 0;
  for (unsigned i = 0; i < c->n; i++) {
    const struct kfield *f = &c->f[i];
    if (pos >= n) break; /* shorter version: the rest is absent */
    size_t avail = n - pos, save = w->len;
    const unsigned char *q = p + pos;
    /* the key: a fixed-size copy of the whole key buffer (inline moves), then the length */
    if (!w->err && w->cap - w->len > sizeof f->key) {
      if (i) {
        memcpy(w->buf + w->len, f->key, sizeof f->key);
        w->len += f->klen;
      } else {
        memcpy(w->buf + w->len, f->key + 1, sizeof f->key - 1);
        w->len += f->klen - 1u;
      }
    } else {
      etw_jw_raw(w, f->key + (i == 0), f->klen - (i == 0));
    }
    long k = -1;
    switch (f->ty) {
    case 'u': if (avail >= 4) { dec_u64(w, d_rd32(q)); k = 4; } break;
    case 'i': if (avail >= 4) { dec_i64(w, (int32_t)d_rd32(q)); k = 4; } break;
    case 'x': if (avail >= 4) { dec_hex(w, d_rd32(q)); k = 4; } break;
    case 'h': if (avail >= 2) { dec_u64(w, d_rd16(q)); k = 2; } break;
    case 'b': if (avail >= 1) { dec_u64(w, q[0]); k = 1; } break;
    case 'c': if (avail >= 1) { dec_i64(w, (int8_t)q[0]); k = 1; } break;
    case 'q': case 't': if (avail >= 8) { dec_u64(w, d_rd64(q)); k = 8; } break;
    case 'j': if (avail >= 8) { dec_i64(w, (int64_t)d_rd64(q)); k = 8; } break;
    case 'X': if (avail >= 8) { dec_hex(w, d_rd64(q)); k = 8; } break;
    case 'p':
      if (avail >= (size_t)ps) {
        dec_hex(w, ps == 4 ? d_rd32(q) : d_rd64(q));
        k = ps;
      }
      break;
    case 'z':
      if (avail >= (size_t)ps) {
        dec_u64(w, ps == 4 ? d_rd32(q) : d_rd64(q));
        k = ps;
      }
      break;
    case 'w': { /* dec_value's UTF-16 case (manifest mode) without its dispatch: up to the NUL
                 * unit, or the rest of the payload when unterminated */
      size_t units = avail / 2, got = dec_str16(w, q, units);
      k = got < units ? (long)got * 2 + 2 : (long)avail;
      break;
    }
    case 'a': { /* dec_value's 8-bit string case (manifest mode) without its dispatch: up to the
                 * NUL, or the rest of the payload when unterminated */
      const unsigned char *z = avail ? memchr(q, 0, avail) : NULL;
      size_t sl = z ? (size_t)(z - q) : avail;
      etw_jw_str(w, (const char *)q, sl);
      k = z ? (long)sl + 1 : (long)avail;
      break;
    }
    case 'g': /* dec_value's GUID case */
      if (avail >= 16 && !etw_jw_reserve(w, 40)) {
        w->len = (size_t)(dec_put_guid(w->buf + w->len, q) - w->buf);
        k = 16;
      } else if (avail >= 16) { /* the writer is in error: as dec_value */
        k = 16;
      }
      break;
    case 'C': k = dec_value(w, 1, 0, q, avail, f->fixed, ps, DV_MANIFEST, NULL); break;
    /* write_fields_n's cases (its key is the same text): no truncation and spec walk per field */
    case 'n': k = dec_value(w, 6, 7, q, avail, -1, ps, DV_MANIFEST, NULL); break;
    case '4': k = dec_value(w, 8, 8, q, avail, -1, ps, DV_MANIFEST, NULL); break;
    case '6': k = dec_value(w, 14, 9, q, avail, 16, ps, DV_MANIFEST, NULL); break;
    case 'f': k = dec_value(w, 17, 0, q, avail, -1, ps, DV_MANIFEST, NULL); break;
    case 'S': { /* one reservation for the array (≤ 21 bytes per element: comma, quoted hex) */
      size_t m = avail / (size_t)ps;
      if (etw_jw_reserve(w, m * 21 + 2)) {
        k = (long)(m * (size_t)ps); /* the writer is in error: nothing is written any more */
        break;
      }
      char *o = w->buf + w->len;
      *o++ = '[';
      for (size_t e = 0; e < m; e++) {
        if (e) *o++ = ',';
        o = dec_put_hex(o, ps == 4 ? d_rd32(q + e * 4) : d_rd64(q + e * 8));
      }
      *o++ = ']';
      w->len = (size_t)(o - w->buf);
      k = (long)(m * (size_t)ps);
      break;
    }
    default: { /* SIDs, addresses, GUIDs, times: the general path for this one field */
      if (w->err) { /* the writer is full: keep its error (a truncate would clear it and let a
                     * field without its value through); the event is given up anyway */
        k = (long)avail;
        break;
      }
      etw_jw_truncate(w, save);
      if (i) etw_jw_ch(w, ',');
      /* write_fields writes the key itself (no comma for its first field) */
      if (write_fields_one(w, f->spec, q, avail, ps, &k) < 0) k = -1;
      break;
    }
    }
    if (k < 0) {
      etw_jw_truncate(w, save);
      return -1;
    }
    pos += (size_t)k;
  }
  return (long)pos;
}

static void write_header(struct etw_jw *w, const struct etw_rec *r) {
  const struct etw_etl_info *in = r->file;
  etw_jw_lit(w, "\"BufferSize\":");
  etw_jw_u64(w, in->buffer_size);
  etw_jw_lit(w, ",\"Version\":");
  etw_jw_u64(w, in->version);
  etw_jw_lit(w, ",\"ProviderVersion\":");
  etw_jw_u64(w, in->provider_version);
  etw_jw_lit(w, ",\"NumberOfProcessors\":");
  etw_jw_u64(w, in->n_cpus);
  etw_jw_lit(w, ",\"EndTime\":");
  etw_jw_filetime(w, in->end_time);
  etw_jw_lit(w, ",\"TimerResolution\":");
  etw_jw_u64(w, in->timer_resolution);
  etw_jw_lit(w, ",\"MaxFileSize\":");
  etw_jw_u64(w, in->max_file_size);
  etw_jw_lit(w, ",\"LogFileMode\":");
  etw_jw_hex(w, in->log_file_mode);
  etw_jw_lit(w, ",\"BuffersWritten\":");
  etw_jw_u64(w, in->buffers_written);
  etw_jw_lit(w, ",\"StartBuffers\":");
  etw_jw_u64(w, in->start_buffers);
  etw_jw_lit(w, ",\"PointerSize\":");
  etw_jw_u64(w, in->pointer_size);
  etw_jw_lit(w, ",\"EventsLost\":");
  etw_jw_u64(w, in->events_lost);
  etw_jw_lit(w, ",\"CPUSpeed\":");
  etw_jw_u64(w, in->cpu_mhz);
  etw_jw_lit(w, ",\"BootTime\":");
  etw_jw_filetime(w, in->boot_time);
  etw_jw_lit(w, ",\"PerfFreq\":");
  etw_jw_u64(w, in->perf_freq);
  etw_jw_lit(w, ",\"StartTime\":");
  etw_jw_filetime(w, in->start_time);
  etw_jw_lit(w, ",\"ReservedFlags\":");
  etw_jw_u64(w, in->clock_type);
  etw_jw_lit(w, ",\"BuffersLost\":");
  etw_jw_u64(w, in->buffers_lost);
  etw_jw_lit(w, ",\"SessionName\":");
  etw_jw_cs(w, in->logger_name);
  etw_jw_lit(w, ",\"LogFileName\":");
  etw_jw_cs(w, in->log_file_name);
  etw_jw_lit(w, ",\"UtcOffsetMinutes\":");
  etw_jw_i64(w, in->tz_bias); /* TIME_ZONE_INFORMATION.Bias as PerfView reports it */
}

long dec_mof_write(struct etw_jw *w, const struct etw_rec *r, const char **why) {
  if ((r->kind == ETW_REC_SYSTEM || r->kind == ETW_REC_PERFINFO) && r->hook_id == 0 && r->file) {
    write_header(w, r); /* the reader parsed this payload (the logfile header) */
    return (long)r->user_len;
  }
  const struct layout *l = find_layout(r);
  if (!l) {
    *why = "no layout known for this kernel/classic event type and version";
    return -1;
  }
  long used = write_compiled(w, l, r->user_data, r->user_len, r->ptr_size);
  if (used < 0) *why = "payload shorter than the layout of this event version";
  return used;
}

unsigned dec_mof_plan_ops(const struct etw_rec *r, int ps, char head[64], uint8_t *hlen, struct dec_kop *ops,
                          unsigned max, uint32_t *need) {
  *need = 0;
  if (ps != 4 && ps != 8) return 0;
  if ((r->kind == ETW_REC_SYSTEM || r->kind == ETW_REC_PERFINFO) && r->hook_id == 0) return 0; /* header */
  const struct layout *l = find_layout(r);
  if (!l) return 0;
  if (!atomic_load_explicit(&compiled_done, memory_order_acquire)) pthread_once(&compiled_once, compile_all);
  const struct klayout *c = &COMPILED[l - LAYOUTS];
  if (!c->ok || !c->n || c->n > max) return 0;
  uint32_t nb = 0; /* the fixed-size fields' bytes; the last field may be a string or a stack */
  for (unsigned i = 0; i < c->n; i++) {
    switch (c->f[i].ty) {
    case 'u': case 'i': case 'x': nb += 4; break;
    case 'h': nb += 2; break;
    case 'b': case 'c': nb += 1; break;
    case 'q': case 't': case 'j': case 'X': nb += 8; break;
    case 'p': case 'z': nb += (uint32_t)ps; break;
    case 'g': nb += 16; break;
    case 'n': nb += 2; break;
    case '6': /* (≤ 42 bytes written: with the key ≤ 72, as every op's room) */
      if (c->f[i].klen > 30) return 0;
      nb += 16;
      break;
    case 'w': case 'S': case 'a': if (i && i == c->n - 1u) break; return 0;
    default: return 0;
    }
  }
  if (!nb) return 0;
  static const char HEAD[] = ",\"EventData\":{";
  for (unsigned i = 0; i < c->n; i++) {
    const struct kfield *f = &c->f[i];
    struct dec_kop *o = &ops[i];
    memset(o->key, 0, sizeof o->key);
    if (i) {
      if (f->klen > sizeof o->key) return 0;
      memcpy(o->key, f->key, f->klen);
      o->klen = f->klen;
    } else {
      if (sizeof HEAD - 1 + f->klen - 1u > 64) return 0;
      memset(head, 0, 64);
      memcpy(head, HEAD, sizeof HEAD - 1);
      memcpy(head + sizeof HEAD - 1, f->key + 1, f->klen - 1u);
      *hlen = (uint8_t)(sizeof HEAD - 1 + f->klen - 1u);
      o->klen = 0;
    }
    switch (f->ty) {
    case 'u': o->ty = DEC_KOP_U32; break;
    case 'i': o->ty = DEC_KOP_I32; break;
    case 'x': o->ty = DEC_KOP_X32; break;
    case 'h': o->ty = DEC_KOP_U16; break;
    case 'b': o->ty = DEC_KOP_U8; break;
    case 'c': o->ty = DEC_KOP_I8; break;
    case 'q': case 't': o->ty = DEC_KOP_U64; break;
    case 'j': o->ty = DEC_KOP_I64; break;
    case 'X': o->ty = DEC_KOP_X64; break;
    case 'p': o->ty = ps == 4 ? DEC_KOP_X32 : DEC_KOP_X64; break;
    case 'z': o->ty = ps == 4 ? DEC_KOP_U32 : DEC_KOP_U64; break;
    case 'g': o->ty = DEC_KOP_GUID; break;
    case 'n': o->ty = DEC_KOP_PORT; break;
    case '6': o->ty = DEC_KOP_IPV6; break;
    case 'w': o->ty = DEC_KOP_STR16; break; /* (the last field: checked above) */
    case 'S': o->ty = DEC_KOP_STACK; break;
    case 'a': o->ty = DEC_KOP_ANSI; break;
    default: return 0; /* not reached */
    }
  }
  *need = nb;
  return c->n;
}

const unsigned char *dec_mof_guid(const struct etw_rec *r) {
  if (r->kind != ETW_REC_SYSTEM && r->kind != ETW_REC_PERFINFO) return r->provider_id;
  unsigned g, t;
  group_type(r, &g, &t);
  if (g >= 32) return NULL;
  uint64_t a, b;
  memcpy(&a, GROUP_GUID[g], 8);
  memcpy(&b, GROUP_GUID[g] + 8, 8);
  return a | b ? GROUP_GUID[g] : NULL; /* an all-zero entry: no group GUID */
}

int dec_mof_classic_guid(const unsigned char g[16]) {
  uint32_t d1 = d_rd32(g); /* the first four bytes tell most GUIDs apart */
  if (d1 != d_rd32(KTC_IMAGEID) && d1 != d_rd32(DEC_GUID_KTC_METADATA) && d1 != d_rd32(SYSCONFIG_EX)) return 0;
  return !memcmp(g, KTC_IMAGEID, 16) || !memcmp(g, DEC_GUID_KTC_METADATA, 16) || !memcmp(g, SYSCONFIG_EX, 16);
}

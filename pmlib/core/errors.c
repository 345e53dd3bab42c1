/* Error messages and names, generated from PM_ERROR_LIST; versions. */
#include "core/internal.h"

const char *pm_version(void)
{
    return PMLIB_VERSION_STRING;
}

const char *pm_strerror(int err)
{
    switch (err) {
    case PM_OK:
        return "success";
#define PM__ERROR_MSG(name, value, msg) \
    case PM_##name:                     \
        return msg;
        PM_ERROR_LIST(PM__ERROR_MSG)
#undef PM__ERROR_MSG
    default:
        return "unknown pmlib error code";
    }
}

const char *pm_errname(int err)
{
    switch (err) {
    case PM_OK:
        return "PM_OK";
#define PM__ERROR_NAME(name, value, msg) \
    case PM_##name:                      \
        return "PM_" #name;
        PM_ERROR_LIST(PM__ERROR_NAME)
#undef PM__ERROR_NAME
    default:
        return "PM_E?";
    }
}

// Where the studio finds the `tessera` CLI it runs (training on the Monitor page, preflight and
// host keys on the Hosts page): beside tessera-studio, as the build and the package install both.
// Pages take a setter so tests can hand them a fake.
#pragma once
#include <QCoreApplication>
#include <QString>

namespace tessera::studio {

inline QString studio_tessera_binary() {
    return QCoreApplication::applicationDirPath() + "/tessera";
}

}  // namespace tessera::studio

// TODO(helper): the checks view.
#pragma once
#include "ui.h"

namespace headscope {

class ChecksView {
public:
    void draw(Session& session, Ui& ui);
};

}  // namespace headscope

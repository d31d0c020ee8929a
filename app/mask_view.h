// TODO(helper): the mask view.
#pragma once
#include "ui.h"

namespace headscope {

class MaskView {
public:
    void draw(Session& session, Ui& ui);
};

}  // namespace headscope

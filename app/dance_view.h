// TODO(helper): the dance view.
#pragma once
#include "ui.h"

namespace headscope {

class DanceView {
public:
    void draw(Session& session, Ui& ui);
    void set_step(int step) { step_ = step; }

private:
    int step_ = 1;
};

}  // namespace headscope

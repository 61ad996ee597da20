// RAR viewer: panels.
"use strict";

// RAR viewer: diff.
"use strict";

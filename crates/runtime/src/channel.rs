//! Real-time channels (rtdroid-android-timeliness.txt §3.2): preallocated, sender-priority-ordered message queues.
